package senderauth

import (
	"errors"
	"strconv"
	"strings"
)

// Record is a DMARC policy record (RFC 7489 §6.3): the tags envelopd uses.
// Reporting tags (rua, ruf, fo, rf, ri) are read for validity only.
type Record struct {
	Policy          string // p: none, quarantine, reject
	SubdomainPolicy string // sp; "" when absent (p applies)
	DKIMAlignment   string // adkim: "r" (default) or "s"
	SPFAlignment    string // aspf: "r" (default) or "s"
	Percent         int    // pct: 0–100, default 100
}

// Record errors.
var (
	ErrNotDMARC    = errors.New("dmarc: not a DMARC record (v=DMARC1 must be the first tag)")
	ErrNoPolicyTag = errors.New("dmarc: record has no valid p= tag")
)

// maxRecordBytes bounds a record read: real ones are a few hundred bytes.
const maxRecordBytes = 4096

// ParseRecord parses a DMARC record. RFC 7489 §6.3: v=DMARC1 must come
// first and p= second (p is looked for anywhere, as receivers do);
// unknown tags are ignored (§6.3 "Unknown tags MUST be ignored"); a
// record without a valid p= but with a rua= is treated as p=none (§6.6.3
// step 6); a bad value of adkim, aspf, pct or sp falls back to its
// default, as a syntax error in a tag other than v and p does not void
// the policy.
func ParseRecord(txt string) (*Record, error) {
	if len(txt) > maxRecordBytes {
		txt = txt[:maxRecordBytes]
	}
	rec := &Record{DKIMAlignment: "r", SPFAlignment: "r", Percent: 100}
	first, hasRUA, hasP := true, false, false
	for part := range strings.SplitSeq(txt, ";") {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if first {
			if !ok || k != "v" || v != "DMARC1" {
				return nil, ErrNotDMARC
			}
			first = false
			continue
		}
		if !ok {
			continue
		}
		lv := strings.ToLower(v)
		switch k {
		case "p":
			if isPolicy(lv) {
				rec.Policy, hasP = lv, true
			}
		case "sp":
			if isPolicy(lv) {
				rec.SubdomainPolicy = lv
			}
		case "adkim":
			if lv == "r" || lv == "s" {
				rec.DKIMAlignment = lv
			}
		case "aspf":
			if lv == "r" || lv == "s" {
				rec.SPFAlignment = lv
			}
		case "pct":
			if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 100 {
				rec.Percent = n
			}
		case "rua":
			hasRUA = v != ""
		}
	}
	if first {
		return nil, ErrNotDMARC
	}
	if !hasP {
		if !hasRUA {
			return nil, ErrNoPolicyTag
		}
		rec.Policy = "none"
	}
	return rec, nil
}

func isPolicy(s string) bool { return s == "none" || s == "quarantine" || s == "reject" }
