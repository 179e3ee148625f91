package senderauth

import (
	"context"
	"errors"
	"net"

	"github.com/envelopd/envelopd/dkim"
)

// TXTTable is a Resolver over a table of TXT records only (a static key
// file, dkim.StaticResolver): offline sender checks. Names the table does
// not have, and every MX, address and PTR lookup, are not found — an SPF
// record's a, mx and ptr terms then match nothing.
type TXTTable struct {
	Table dkim.Resolver
}

// LookupTXT implements Resolver.
func (t TXTTable) LookupTXT(ctx context.Context, name string) ([]string, error) {
	txts, err := t.Table.LookupTXT(ctx, name)
	if err == nil {
		return txts, nil
	}
	var le *dkim.LookupError
	if errors.Is(err, dkim.ErrNoRecord) || errors.As(err, &le) && !le.Temp {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return nil, &net.DNSError{Err: err.Error(), Name: name, IsTemporary: true}
}

// LookupMX implements Resolver: never found.
func (TXTTable) LookupMX(_ context.Context, name string) ([]*net.MX, error) {
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// LookupIPAddr implements Resolver: never found.
func (TXTTable) LookupIPAddr(_ context.Context, name string) ([]net.IPAddr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// LookupAddr implements Resolver: never found.
func (TXTTable) LookupAddr(_ context.Context, addr string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", Name: addr, IsNotFound: true}
}
