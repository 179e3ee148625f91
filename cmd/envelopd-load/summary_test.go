package main

import "testing"

func TestSummarize(t *testing.T) {
	cmp := func(env, base float64) *Comparison {
		return &Comparison{Envelopd: &Result{MsgPerSec: env}, Baseline: &Result{MsgPerSec: base}, Ratio: env / base}
	}
	for _, c := range []struct {
		name                  string
		in                    []*Comparison
		ratio, envRate, baseR float64
	}{
		{"one run", []*Comparison{cmp(100, 400)}, 0.25, 100, 400},
		{"odd: the middle", []*Comparison{cmp(300, 400), cmp(100, 400), cmp(200, 400)}, 0.5, 200, 400},
		{"even: mean of the middle two", []*Comparison{cmp(100, 200), cmp(300, 600), cmp(100, 100), cmp(200, 800)},
			0.5, 150, 400},
	} {
		s := summarize("m", c.in)
		if s.Runs != len(c.in) || s.Median != c.ratio || s.Envelopd != c.envRate || s.Baseline != c.baseR {
			t.Errorf("%s: %+v, want median ratio %v, envelopd %v, baseline %v", c.name, s, c.ratio, c.envRate, c.baseR)
		}
		for i, r := range s.Ratios {
			if r != c.in[i].Ratio {
				t.Errorf("%s: ratio %d = %v, want %v (run order)", c.name, i, r, c.in[i].Ratio)
			}
		}
	}
}
