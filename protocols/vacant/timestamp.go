package vacant

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// tsRE is the subset of what Python's datetime.fromisoformat accepts that
// carries a zone: date, 'T' or space, hh:mm[:ss[.frac]], then Z or ±hh[:]mm.
var tsRE = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})$`)

// ParseTime reads a wire timestamp as datetime.fromisoformat does, to the
// microsecond (extra fraction digits are truncated, as Python does).
func ParseTime(s string) (time.Time, error) {
	m := tsRE.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, fmt.Errorf("timestamp %q is not ISO 8601 with a zone (e.g. 2026-05-06T12:00:00+00:00)", s)
	}
	n := func(x string) int { v, _ := strconv.Atoi(x); return v }
	year, mon, day, hh, mm, ss := n(m[1]), n(m[2]), n(m[3]), n(m[4]), n(m[5]), n(m[6])
	us := 0
	if f := m[7]; f != "" {
		for len(f) < 6 {
			f += "0"
		}
		us = n(f[:6])
	}
	if mon < 1 || mon > 12 || day < 1 || hh > 23 || mm > 59 || ss > 59 {
		return time.Time{}, fmt.Errorf("timestamp %q: field out of range", s)
	}
	off := 0
	if z := m[8]; z != "Z" {
		digits := z[1:]
		if len(digits) == 5 {
			digits = digits[:2] + digits[3:]
		}
		oh, om := n(digits[:2]), n(digits[2:])
		if oh > 23 || om > 59 {
			return time.Time{}, fmt.Errorf("timestamp %q: zone out of range", s)
		}
		off = oh*3600 + om*60
		if z[0] == '-' {
			off = -off
		}
	}
	t := time.Date(year, time.Month(mon), day, hh, mm, ss, us*1000, time.FixedZone("", off))
	if t.Day() != day || int(t.Month()) != mon {
		return time.Time{}, fmt.Errorf("timestamp %q: no such date", s)
	}
	return t.UTC(), nil
}
