package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

func TestBudgetBound(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Budget
		// want
		floor, use, maxRate, maxRatio, sameUse float64
	}{
		{
			// The keep-open figures of 2026-11-23: a 14,000 msg/s pair at
			// 70 + 54 µs, envelopd's stages 148 + 161 µs.
			name:  "keep-open",
			in:    Budget{CPUs: 2, BaselineMsgPerSec: 14000, BaselineServerCPU: 70, BaselineClientCPU: 54, AnalyzeCPU: 148, StoreCPU: 161},
			floor: 433, use: 14000 * 124 / 1e6 / 2, maxRate: 2e6 / 433, maxRatio: 2e6 / 433 / 14000, sameUse: 124.0 / 433,
		},
		{
			name:  "one CPU, the stages cost as much as the pair",
			in:    Budget{CPUs: 1, BaselineMsgPerSec: 5000, BaselineServerCPU: 100, BaselineClientCPU: 100, AnalyzeCPU: 50, StoreCPU: 150},
			floor: 400, use: 1, maxRate: 2500, maxRatio: 0.5, sameUse: 0.5,
		},
		{
			name:  "no baseline rate: no ratio",
			in:    Budget{CPUs: 2, BaselineServerCPU: 100, AnalyzeCPU: 100},
			floor: 200, use: 0, maxRate: 1e4, maxRatio: 0, sameUse: 0.5,
		},
		{
			name: "nothing measured: no bound",
			in:   Budget{CPUs: 2},
		},
	} {
		b := c.in
		b.bound()
		if b.FloorCPU != c.floor || b.BaselineCPUUse != c.use || b.MaxMsgPerSec != c.maxRate ||
			b.MaxRatio != c.maxRatio || b.MaxRatioSameUse != c.sameUse {
			t.Errorf("%s: floor %v, use %v, max rate %v, max ratio %v, same-use ratio %v; want %v, %v, %v, %v, %v",
				c.name, b.FloorCPU, b.BaselineCPUUse, b.MaxMsgPerSec, b.MaxRatio, b.MaxRatioSameUse,
				c.floor, c.use, c.maxRate, c.maxRatio, c.sameUse)
		}
	}
}

func TestUnstuff(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a\r\n..b\r\n.\r\n", "a\r\n.b\r\n\r\n"},
		{"..\r\nx.\r\n", ".\r\nx.\r\n"},
		{"no dots\r\n", "no dots\r\n"},
		{"", ""},
	} {
		if got := unstuff([]byte(c.in)); string(got) != c.want {
			t.Errorf("unstuff(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// The generator's mails come back as they were before stuffing.
	for _, raw := range []string{".leading\r\nbody\r\n", "a\r\n.\r\n..two\r\n"} {
		if got := unstuff(dotStuff([]byte(raw))); !bytes.Equal(got, []byte(raw)) {
			t.Errorf("unstuff(dotStuff(%q)) = %q", raw, got)
		}
	}
}

// TestMeasureBudget runs the in-process stages over a small generated
// corpus: every mail verifies and is accepted, and the floor is the sum of
// the parts it names.
func TestMeasureBudget(t *testing.T) {
	const n = 40
	c, err := Generate(GenOptions{Messages: n, Seed: 3, RSAShare: 0.5, AttachShare: 0.5, Keys: testKeys()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := staticVerifier(c)
	if err != nil {
		t.Fatal(err)
	}
	raws := make([][]byte, n)
	for i := range c.Mails {
		raws[i] = unstuff(c.Mails[i].Data)
	}
	base := &Result{Messages: n, Accepted: n, MsgPerSec: 1000, ServerCPUSeconds: 0.004, ClientCPUSeconds: 0.002}
	b, err := measureBudget(context.Background(), "envelopd-load", base, raws, v, 4, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	if b.Messages != n || b.DKIMPass != n || b.StoreStatus["accepted"] != n || len(b.StoreStatus) != 1 {
		t.Errorf("messages %d, DKIM pass %d, store %v; want %d, all passing, all accepted", b.Messages, b.DKIMPass, b.StoreStatus, n)
	}
	if b.BaselineServerCPU != 100 || b.BaselineClientCPU != 50 {
		t.Errorf("baseline CPU per message %v + %v µs, want 100 + 50", b.BaselineServerCPU, b.BaselineClientCPU)
	}
	if b.DKIMCPU <= 0 || b.AnalyzeCPU <= 0 || b.StoreCPU <= 0 || b.StoreBatch < 1 {
		t.Errorf("stage CPU: DKIM %v, analysis %v, store %v µs, %v msg/commit; want all measured", b.DKIMCPU, b.AnalyzeCPU, b.StoreCPU, b.StoreBatch)
	}
	if want := 150 + b.AnalyzeCPU + b.StoreCPU; b.FloorCPU != want {
		t.Errorf("floor %v, want %v", b.FloorCPU, want)
	}
	if b.MaxRatioSameUse != 150/b.FloorCPU {
		t.Errorf("same-use ratio %v, want %v", b.MaxRatioSameUse, 150/b.FloorCPU)
	}
}
