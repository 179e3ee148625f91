package domain

import (
	"fmt"
	"net"
	"strings"
)

// DKIMKey is one key envelopd signs the domain's mail with: its selector
// and the TXT value of its public key (dkim.TXTRecord).
type DKIMKey struct {
	Selector string `json:"selector"`
	TXT      string `json:"txt"`
}

// Config is what a managed domain's records are made of; the store keeps
// it as JSON.
type Config struct {
	// Hostname is the MX target: the name of the host envelopd answers
	// SMTP on (serve --hostname).
	Hostname string    `json:"hostname"`
	DKIM     []DKIMKey `json:"dkim"`
	// SPF is the domain's SPF record (default "v=spf1 mx ~all": the MX
	// host; a smarthost's own include: goes here).
	SPF string `json:"spf"`
	// DMARCReport and TLSReport are the aggregate-report addresses
	// (default dmarc-reports@ and tls-reports@ the domain).
	DMARCReport string `json:"dmarc_report"`
	TLSReport   string `json:"tls_report"`
	// DMARCPolicy is p= (none, quarantine, reject; default none, the
	// monitoring start RFC 7489 §6.7 suggests).
	DMARCPolicy string `json:"dmarc_policy"`
	// STSID is the MTA-STS policy id (RFC 8461 §3.1), changed whenever
	// the policy changes; STSMode its mode (testing or enforce; default
	// testing).
	STSID   string `json:"mta_sts_id"`
	STSMode string `json:"mta_sts_mode"`
}

// Record types.
const (
	TypeMX    = "MX"
	TypeTXT   = "TXT"
	TypeCNAME = "CNAME"
)

// Record is one DNS record a domain needs.
type Record struct {
	Kind     string `json:"kind"` // mx, spf, dkim, dmarc, mta-sts, mta-sts-host, tls-rpt
	Type     string `json:"type"`
	Name     string `json:"name"` // absolute, without the trailing dot
	Value    string `json:"value"`
	Priority int    `json:"priority,omitempty"` // MX
}

// defaults fills the unset settings of c for domain d.
func (c Config) defaults(d string) Config {
	if c.SPF == "" {
		c.SPF = "v=spf1 mx ~all"
	}
	if c.DMARCReport == "" {
		c.DMARCReport = "dmarc-reports@" + d
	}
	if c.TLSReport == "" {
		c.TLSReport = "tls-reports@" + d
	}
	if c.DMARCPolicy == "" {
		c.DMARCPolicy = "none"
	}
	if c.STSMode == "" {
		c.STSMode = "testing"
	}
	return c
}

// Records returns the records domain d needs, in a fixed order.
func Records(d string, c Config) []Record {
	c = c.defaults(d)
	rs := []Record{
		{Kind: "mx", Type: TypeMX, Name: d, Value: strings.TrimSuffix(c.Hostname, ".") + ".", Priority: 10},
		{Kind: "spf", Type: TypeTXT, Name: d, Value: c.SPF},
	}
	for _, k := range c.DKIM {
		rs = append(rs, Record{Kind: "dkim", Type: TypeTXT, Name: k.Selector + "._domainkey." + d, Value: k.TXT})
	}
	rs = append(rs,
		Record{Kind: "dmarc", Type: TypeTXT, Name: "_dmarc." + d, Value: fmt.Sprintf("v=DMARC1; p=%s; rua=mailto:%s", c.DMARCPolicy, c.DMARCReport)},
		Record{Kind: "mta-sts", Type: TypeTXT, Name: "_mta-sts." + d, Value: "v=STSv1; id=" + c.STSID},
		Record{Kind: "mta-sts-host", Type: TypeCNAME, Name: "mta-sts." + d, Value: strings.TrimSuffix(c.Hostname, ".") + "."},
		Record{Kind: "tls-rpt", Type: TypeTXT, Name: "_smtp._tls." + d, Value: "v=TLSRPTv1; rua=mailto:" + c.TLSReport},
	)
	return rs
}

// STSPolicy is the MTA-STS policy file served at
// https://mta-sts.DOMAIN/.well-known/mta-sts.txt (RFC 8461 §3.2): CRLF
// lines, the MX host, a week's max_age.
func STSPolicy(d string, c Config) string {
	c = c.defaults(d)
	return "version: STSv1\r\nmode: " + c.STSMode + "\r\nmx: " + strings.TrimSuffix(c.Hostname, ".") + "\r\nmax_age: 604800\r\n"
}

// Zone returns the records as a BIND zone-file fragment (RFC 1035 §5.1):
// absolute names, TTL 3600, TXT values split into strings of at most
// 255 bytes (§3.3.14). It loads after the zone's SOA and NS.
func Zone(d string, c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "; envelopd records for %s\n", d)
	for _, r := range Records(d, c) {
		switch r.Type {
		case TypeMX:
			fmt.Fprintf(&b, "%s.\t3600\tIN\tMX\t%d %s\n", r.Name, r.Priority, r.Value)
		case TypeCNAME:
			fmt.Fprintf(&b, "%s.\t3600\tIN\tCNAME\t%s\n", r.Name, r.Value)
		case TypeTXT:
			fmt.Fprintf(&b, "%s.\t3600\tIN\tTXT\t%s\n", r.Name, quoteTXT(r.Value))
		}
	}
	return b.String()
}

// quoteTXT writes a TXT value as quoted character-strings of at most 255
// bytes, escaping '"' and '\'.
func quoteTXT(v string) string {
	var parts []string
	for {
		n := min(len(v), 255)
		s := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v[:n])
		parts = append(parts, `"`+s+`"`)
		v = v[n:]
		if v == "" {
			break
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "( " + strings.Join(parts, " ") + " )"
}

// Publisher is a DNS server records can be added to (authdns/dnstest's
// Server, in tests).
type Publisher interface {
	MX(name string, pref uint16, host string)
	CNAME(name, target string)
	TXT(name string, strs ...string)
	A(name, ip string)
}

// Publish adds rs to p, each changed by edit (kind → value; "" leaves
// the records of that kind out; an address as the mta-sts-host value
// publishes an A record instead of the alias).
func Publish(p Publisher, rs []Record, edit map[string]string) {
	for _, r := range rs {
		v, changed := edit[r.Kind]
		if !changed {
			v = r.Value
		}
		if v == "" {
			continue
		}
		switch r.Type {
		case TypeMX:
			p.MX(r.Name, uint16(r.Priority), v)
		case TypeCNAME:
			if net.ParseIP(v) != nil {
				p.A(r.Name, v)
			} else {
				p.CNAME(r.Name, v)
			}
		case TypeTXT:
			p.TXT(r.Name, v)
		}
	}
}
