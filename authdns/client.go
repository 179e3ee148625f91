// Package authdns is the one DNS resolver behind envelopd's sender
// authentication: SPF (RFC 7208), DMARC (RFC 7489), ARC (RFC 8617) and
// DKIM key lookups all go through a Client.
//
// A Client is a small stub resolver (RFC 1035 over UDP, retried over TCP
// when the answer is truncated, §4.2) that asks one recursive server —
// the first nameserver of /etc/resolv.conf, or the one --dns names — and
// keeps the answers for their TTL (negative answers for the SOA minimum,
// RFC 2308 §5). Every lookup has a timeout; a timeout, SERVFAIL or
// unreadable answer is a temporary error (*net.DNSError with IsTemporary)
// that the callers turn into temperror and that is never cached. A name
// without records of the type asked is a *net.DNSError with IsNotFound.
//
// Hostile answers are bounded: a response is at most 64 KiB (the DNS
// message limit), at most MaxRecords records of the type asked are kept,
// CNAME chains are followed at most 8 deep inside one answer, and the
// cache holds at most MaxEntries names. The callers bound the number of
// lookups per message (RFC 7208 §4.6.4's 10 lookups and 2 void lookups).
package authdns

import (
	"context"
	"net"
)

// Resolver is the lookups sender authentication needs. Its method set is
// that of *net.Resolver, so that SPF libraries accept it as is; errors
// are *net.DNSError values.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}
