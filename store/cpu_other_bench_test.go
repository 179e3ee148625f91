//go:build !unix

package store_test

import "time"

// cpuNow is not measured here (cpu-µs/msg reads 0).
func cpuNow() time.Duration { return 0 }
