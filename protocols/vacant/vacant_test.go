package vacant

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

const dir = "../../testdata/protocols/vacant"

type want struct {
	Errors  []vectors.Problem `json:"errors"`
	Summary json.RawMessage   `json:"summary"`
	Link    *struct {
		Chain string `json:"chain"`
		Seq   int64  `json:"seq"`
		Prev  string `json:"prev"`
		Hash  string `json:"hash"`
	} `json:"link"`
}

func sameJSON(t *testing.T, got any, want json.RawMessage) bool {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(g, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

// TestValidate runs every NAME.json against NAME.want: exact codes and
// fields in order, the summary, and for valid envelopes the chain link with
// the hash computed by Python's hashlib.blake2b.
func TestValidate(t *testing.T) {
	vectors.Each(t, dir, 40, ".want", func(t *testing.T, doc, wb []byte) {
		var w want
		if err := json.Unmarshal(wb, &w); err != nil {
			t.Fatal(err)
		}
		r := Validate(doc)
		vectors.CheckErrors(t, r, w.Errors)
		if r.Protocol != "vacant" {
			t.Errorf("Protocol %q", r.Protocol)
		}
		if !sameJSON(t, r.Summary, w.Summary) {
			t.Errorf("summary = %v, want %s", r.Summary, w.Summary)
		}
		switch {
		case w.Link == nil && len(r.Links) != 0:
			t.Errorf("links %v on an invalid envelope", r.Links)
		case w.Link != nil:
			wl := protocols.Link{Chain: w.Link.Chain, Seq: w.Link.Seq, Prev: w.Link.Prev, Hash: w.Link.Hash}
			if len(r.Links) != 1 || r.Links[0] != wl {
				t.Errorf("links = %+v, want %+v", r.Links, wl)
			}
		}
	})
}

// TestSignVectors checks that Sign reproduces the signing bytes, signature
// and hash that Python produced, and that the wire form validates.
func TestSignVectors(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(dir, "sign", "*.json"))
	if len(files) < 3 {
		t.Fatalf("found %d sign vectors", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				Seed, To, TS, Prev, Idem string
				Seq                      int64
				Message                  json.RawMessage
				SigningBytes             string `json:"signing_bytes"`
				Signature, Hash          string
			}
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			msg, err := MessageFromJSON(v.Message)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := ParseTime(v.TS)
			if err != nil {
				t.Fatal(err)
			}
			seed, _ := hex.DecodeString(v.Seed)
			e := &Envelope{To: v.To, Seq: v.Seq, Time: ts, Prev: v.Prev, Idem: v.Idem, Payload: msg}
			wire, err := Sign(e, ed25519.NewKeyFromSeed(seed))
			if err != nil {
				t.Fatal(err)
			}
			sb, err := SigningBytes(e)
			if err != nil {
				t.Fatal(err)
			}
			if string(sb) != v.SigningBytes {
				t.Errorf("signing bytes:\n got %s\nwant %s", sb, v.SigningBytes)
			}
			if e.Signature != v.Signature {
				t.Errorf("signature = %s, want %s", e.Signature, v.Signature)
			}
			if h := Hash(sb); h != v.Hash {
				t.Errorf("hash = %s, want %s", h, v.Hash)
			}
			r := Validate(wire)
			if !r.Valid || len(r.Links) != 1 || r.Links[0].Hash != v.Hash {
				t.Errorf("own wire form: %+v\n%s", r, wire)
			}
		})
	}
}

func TestTimes(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2026-05-06T12:00:00+00:00", "2026-05-06T12:00:00+00:00"},
		{"2026-05-06T12:00:00Z", "2026-05-06T12:00:00+00:00"},
		{"2026-05-06 12:00:00.5+00:00", "2026-05-06T12:00:00.500000+00:00"},
		{"2026-05-06T12:00:00.1234567+00:00", "2026-05-06T12:00:00.123456+00:00"},
		{"2026-05-06T12:00:00.000000+00:00", "2026-05-06T12:00:00+00:00"},
		{"2026-05-06T14:30+0230", "2026-05-06T12:00:00+00:00"},
		{"2026-05-06T12:00:00,25-01:00", "2026-05-06T13:00:00.250000+00:00"},
	}
	for _, tc := range tests {
		ts, err := ParseTime(tc.in)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tc.in, err)
			continue
		}
		if got := FormatTime(ts); got != tc.want {
			t.Errorf("%q → %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"2026-05-06T12:00:00", "2026-13-01T00:00:00Z", "2026-05-06T24:00:00Z", "20260506T120000Z", "2026-05-06T12:00:60Z"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) accepted", bad)
		}
	}
	if got := FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 999, time.UTC)); got != "2026-01-02T03:04:05+00:00" {
		t.Errorf("sub-microsecond time: %s", got)
	}
}

func TestIsVacant(t *testing.T) {
	vectors.Detects(t, dir, "IsVacant", IsVacant, map[string]bool{"chain_1.json": true, "missing_metadata.json": false, "missing_jsonrpc.json": false})
}

func TestSignRejects(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	good := Envelope{To: ZeroHash, Seq: 1, Time: time.Unix(0, 0), Payload: Message{Role: "ROLE_USER"}}
	for name, mut := range map[string]func(e *Envelope){
		"seq0":       func(e *Envelope) { e.Seq = 0 },
		"bad to":     func(e *Envelope) { e.To = "xyz" },
		"seq1 prev":  func(e *Envelope) { e.Prev = strings.Repeat("ab", 32) },
		"no role":    func(e *Envelope) { e.Payload.Role = "" },
		"image part": func(e *Envelope) { e.Payload.Parts = []Part{{Type: "image"}} },
		"no time":    func(e *Envelope) { e.Time = time.Time{} },
	} {
		e := good
		mut(&e)
		if _, err := Sign(&e, priv); err == nil {
			t.Errorf("%s: Sign accepted", name)
		}
	}
	e := good
	if _, err := Sign(&e, priv); err != nil {
		t.Errorf("good envelope: %v", err)
	}
}

func FuzzVacant(f *testing.F) {
	for _, b := range vectors.Docs(f, dir) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := Validate(doc)
		if r.Valid != (len(r.Errors) == 0) || r.Valid != (len(r.Links) == 1) {
			t.Fatalf("inconsistent report %+v", r)
		}
		vectors.CheckProblems(t, r)
	})
}
