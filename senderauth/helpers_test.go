package senderauth_test

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
)

// dns starts an in-process DNS server and returns it with a resolver
// pointed at it (no cache: each test sees the zone as it is now).
func dns(t *testing.T) (*dnstest.Server, *authdns.Client) {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c, err := authdns.New(authdns.Config{Server: s.Addr(), MaxEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// loadKeys adds a "name TXT-value" file's records to s.
func loadKeys(t *testing.T, s *dnstest.Server, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if ok {
			s.TXT(name, value)
		}
	}
}
