package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's utime and stime. It
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU time (user + system) process pid has used so
// far, from /proc/PID/stat (proc(5): fields 14 utime and 15 stime, counted
// after the parenthesised command name, which may hold spaces).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	d, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// parseStatCPU reads utime + stime from a /proc/PID/stat line.
func parseStatCPU(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields, want at least 15", len(f)+2)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad time field %q", v)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// rusageCPU is the user + system time of who (syscall.RUSAGE_SELF or
// RUSAGE_CHILDREN, the latter counting waited-for children only).
func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the CPU a server process and this process (with its
// waited-for children) use between start and stop.
type cpuMeter struct {
	pid                  int
	server, self, childs time.Duration
	ok                   bool
}

func startCPU(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid, self: rusageCPU(syscall.RUSAGE_SELF), childs: rusageCPU(syscall.RUSAGE_CHILDREN)}
	var err error
	m.server, err = procCPU(pid)
	m.ok = err == nil
	return m
}

// stop fills r's CPU fields (server left 0 when /proc is unreadable).
func (m *cpuMeter) stop(r *Result) {
	if r == nil {
		return
	}
	if m.ok {
		if end, err := procCPU(m.pid); err == nil {
			r.ServerCPUSeconds = (end - m.server).Seconds()
		}
	}
	self := rusageCPU(syscall.RUSAGE_SELF) - m.self
	childs := rusageCPU(syscall.RUSAGE_CHILDREN) - m.childs
	r.ClientCPUSeconds = (self + childs).Seconds()
}
