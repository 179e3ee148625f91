package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       time.Duration
		ok         bool
	}{
		{"plain", "4242 (envelopd) S 1 4242 4242 0 -1 4194560 1855 0 0 0 250 37 0 0 20 0 9 0 12345 1 2", 2870 * time.Millisecond, true},
		{"spaces and parens in the name", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", 70 * time.Millisecond, true},
		{"no name", "7 a R 1", 0, false},
		{"too short", "7 (x) R 1 2 3", 0, false},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 4 0 0", 0, false},
	} {
		got, err := parseStatCPU(c.line)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s: %v, %v; want %v (ok %v)", c.name, got, err, c.want, c.ok)
		}
	}
}

// TestProcCPUMatchesRusage: this process's CPU from /proc agrees with
// getrusage after some work (within the 10 ms tick of /proc).
func TestProcCPUMatchesRusage(t *testing.T) {
	start := rusageCPU(syscall.RUSAGE_SELF)
	x := 0
	for rusageCPU(syscall.RUSAGE_SELF)-start < 100*time.Millisecond {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
	p, err := procCPU(os.Getpid())
	r := rusageCPU(syscall.RUSAGE_SELF)
	if err != nil {
		t.Fatal(err)
	}
	if d := r - p; d < -20*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("/proc says %v, getrusage %v", p, r)
	}
}
