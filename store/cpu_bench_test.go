//go:build unix

package store_test

import (
	"syscall"
	"time"
)

// cpuNow is the CPU time (user + system) this process has used, for the
// benchmarks' cpu-µs/msg.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
