package main

import (
	"bytes"
	"context"
	"crypto"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/envelopd/envelopd/dkim"
)

// testKeys are generated once per test binary (RSA key generation is slow).
var testKeys = sync.OnceValue(func() []crypto.Signer {
	k, err := GenerateKeys()
	if err != nil {
		panic(err)
	}
	return k
})

// TestGenerate checks the corpus: every type, distinct ids, wire-ready
// bytes near the asked size, and every signature verifies against the
// run's own key file.
func TestGenerate(t *testing.T) {
	c, err := Generate(GenOptions{Messages: 36, Seed: 7, RSAShare: 0.5, AttachShare: 0.5, Keys: testKeys()})
	if err != nil {
		t.Fatal(err)
	}
	v, err := staticVerifier(c)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	types := map[string]int{}
	algos := map[string]int{}
	attachments := 0
	for i, m := range c.Mails {
		if ids[m.MessageID] {
			t.Errorf("mail %d: duplicate Message-ID %s", i, m.MessageID)
		}
		ids[m.MessageID] = true
		types[m.Type]++
		if n := len(m.Data); n < 1800 || n > 2400 {
			t.Errorf("mail %d: %d bytes, want about 2048", i, n)
		}
		if !bytes.HasSuffix(m.Data, []byte("\r\n")) {
			t.Errorf("mail %d does not end in CRLF", i)
		}
		for j, line := range bytes.Split(m.Data, []byte("\r\n")) {
			if bytes.ContainsAny(line, "\r\n") {
				t.Errorf("mail %d line %d: bare CR or LF", i, j)
			}
			if len(line) > 998 {
				t.Errorf("mail %d line %d: %d bytes long", i, j, len(line))
			}
		}
		if !bytes.Contains(m.Data, []byte("\r\nSubject: "+strings.ToUpper(m.Type)+" | ")) {
			t.Errorf("mail %d: no %s subject", i, m.Type)
		}
		if bytes.Contains(m.Data, []byte("application/json")) {
			attachments++
		}
		results, err := v.Verify(context.Background(), m.Data)
		if err != nil || len(results) != 1 || results[0].Result != dkim.Pass {
			t.Errorf("mail %d: DKIM %+v, %v; want one pass", i, results, err)
			continue
		}
		algos[results[0].Algorithm]++
	}
	for _, typ := range Types {
		if types[typ] != 4 {
			t.Errorf("type %s: %d mails, want 4", typ, types[typ])
		}
	}
	if len(algos) != 2 {
		t.Errorf("algorithms %v, want rsa-sha256 and ed25519-sha256", algos)
	}
	if attachments == 0 || attachments == len(c.Mails) {
		t.Errorf("%d of %d mails have attachments, want some", attachments, len(c.Mails))
	}
}

// TestGenerateDeterministic: the same seed and run id give the same
// content apart from signatures (keys are fresh per run).
func TestGenerateDeterministic(t *testing.T) {
	strip := func(b []byte) string {
		i := bytes.Index(b, []byte("\r\nFrom: "))
		return string(b[i:])
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a, _ := Generate(GenOptions{Messages: 9, Seed: 3, RunID: "fixed", Now: now, Keys: testKeys()})
	b, _ := Generate(GenOptions{Messages: 9, Seed: 3, RunID: "fixed", Now: now, Keys: testKeys()})
	for i := range a.Mails {
		if strip(a.Mails[i].Data) != strip(b.Mails[i].Data) {
			t.Errorf("mail %d differs between runs with the same seed", i)
		}
	}
}

func TestDotStuff(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\r\nb\r\n", "a\r\nb\r\n"},
		{".a\r\n", "..a\r\n"},
		{"a\r\n.\r\n..b\r\n", "a\r\n..\r\n...b\r\n"},
		{"a.b\r\n", "a.b\r\n"},
	} {
		if got := string(dotStuff([]byte(tc.in))); got != tc.want {
			t.Errorf("dotStuff(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDriveNoop drives the in-process no-op server both ways and checks
// the count, the percentiles' order and the record file.
func TestDriveNoop(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewNoopServer()
	go srv.Serve(ln)
	defer srv.Close()
	c, err := Generate(GenOptions{Messages: 60, Keys: testKeys()})
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{true, false} {
		for _, nopipe := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "record")
			rec, err := OpenRecorder(path)
			if err != nil {
				t.Fatal(err)
			}
			r := Drive(context.Background(), c.Mails, DriveOptions{Addr: ln.Addr().String(), Sessions: 4, KeepOpen: keep, NoPipelining: nopipe, Record: rec})
			if err := rec.Close(); err != nil {
				t.Fatal(err)
			}
			if r.Accepted != 60 || r.Rejected != 0 || r.Failed != 0 || r.FirstError != "" {
				t.Errorf("keep=%v nopipe=%v: %+v", keep, nopipe, r)
			}
			if !(r.P50ms <= r.P90ms && r.P90ms <= r.P99ms && r.P99ms <= r.MaxMs && r.MaxMs > 0) {
				t.Errorf("percentiles out of order: %+v", r)
			}
			ids, err := ReadRecord(path)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, id := range ids {
				seen[id] = true
			}
			if len(ids) != 60 || len(seen) != 60 {
				t.Errorf("record holds %d ids (%d distinct), want 60", len(ids), len(seen))
			}
			for _, m := range c.Mails {
				if !seen[m.MessageID] {
					t.Errorf("record misses %s", m.MessageID)
				}
			}
		}
	}
}

// TestDriveServerGone: a dead server ends the run with failures instead of hanging.
func TestDriveServerGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, _ := Generate(GenOptions{Messages: 5, Keys: testKeys()})
	r := Drive(context.Background(), c.Mails, DriveOptions{Addr: addr, Sessions: 2, KeepOpen: true})
	if r.Accepted != 0 || r.Failed != 2 || r.FirstError == "" {
		t.Errorf("%+v, want 0 accepted and 2 failed sessions", r)
	}
}
