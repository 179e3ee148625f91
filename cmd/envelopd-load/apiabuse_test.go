package main

import (
	"testing"
	"time"
)

// TestPhaseSlowest: a phase's result names its eight slowest list
// requests, slowest first, with their round and time into the phase.
func TestPhaseSlowest(t *testing.T) {
	t.Parallel()
	var p phaseSamples
	for i := range 20 {
		d := time.Duration(i%10+1) * time.Millisecond
		p.list = append(p.list, d)
		p.send = append(p.send, d)
		p.slow = append(p.slow, slowSample{Round: i/10 + 1, AtMS: float64(20 * (i % 10)), MS: float64(d.Milliseconds())})
	}
	p.cpu = 1500 * time.Millisecond
	r := p.result()
	want := []float64{10, 10, 9, 9, 8, 8, 7, 7}
	if len(r.ListSlowest) != len(want) {
		t.Fatalf("%d slowest, want %d", len(r.ListSlowest), len(want))
	}
	for i, s := range r.ListSlowest {
		if s.MS != want[i] || s.AtMS != 20*(s.MS-1) {
			t.Errorf("slowest %d: %+v, want %v ms at %v ms", i, s, want[i], 20*(want[i]-1))
		}
	}
	if r.ProcessCPU != 1.5 || r.List.Requests != 20 || r.List.MaxMS != 10 {
		t.Errorf("result %+v %+v, want 1.5 s of CPU and 20 list requests up to 10 ms", r, r.List)
	}
}
