package aicp

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
	"github.com/envelopd/envelopd/protocols/internal/vectors"
)

const dir = "../../testdata/protocols/aicp"

// defaultNow is the receive time of the vectors unless a .want sets "now".
const defaultNow = 1735776000

type want struct {
	Now     int64             `json:"now"`
	Keys    map[string]string `json:"keys"`
	Errors  []vectors.Problem `json:"errors"`
	Summary map[string]any    `json:"summary"`
}

func loadKeys(t testing.TB) map[string][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		handle, k, _ := strings.Cut(line, " ")
		raw, err := ParseKey(k)
		if err != nil {
			t.Fatalf("keys.txt %s: %v", handle, err)
		}
		keys[handle] = raw
	}
	return keys
}

// TestValidate runs every NAME.json against NAME.want (exact codes and
// fields, in order, and the exact summary).
func TestValidate(t *testing.T) {
	keys := loadKeys(t)
	vectors.Each(t, dir, 40, ".want", func(t *testing.T, doc, wb []byte) {
		var w want
		var err error
		if err = json.Unmarshal(wb, &w); err != nil {
			t.Fatal(err)
		}
		opts := Options{Keys: keys, Now: time.Unix(defaultNow, 0)}
		if w.Now != 0 {
			opts.Now = time.Unix(w.Now, 0)
		}
		if w.Keys != nil {
			opts.Keys = map[string][]byte{}
			for h, k := range w.Keys {
				if opts.Keys[h], err = ParseKey(k); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := Validate(doc, opts)
		if r.Protocol != "aicp" {
			t.Errorf("Protocol = %q", r.Protocol)
		}
		vectors.CheckErrors(t, r, w.Errors)
		if !reflect.DeepEqual(r.Summary, w.Summary) {
			t.Errorf("summary = %v, want %v", r.Summary, w.Summary)
		}
		if r.Valid {
			checkClaims(t, doc, r.Claims)
		} else if len(r.Claims) != 0 {
			t.Errorf("invalid report carries claims %v", r.Claims)
		}
	})
}

func checkClaims(t *testing.T, doc []byte, claims []protocols.Claim) {
	t.Helper()
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		t.Fatal(err)
	}
	from, id, nonce := m["from"].(string), m["id"].(string), m["nonce"].(string)
	if len(claims) != 2 {
		t.Fatalf("claims = %v, want nonce and id", claims)
	}
	for i, c := range []struct{ kind, key string }{{ClaimNonce, from + "\x00" + nonce}, {ClaimID, from + "\x00" + id}} {
		got := claims[i]
		if got.Kind != c.kind || got.Key != c.key || got.Window != 86400 || len(got.Value) != 64 ||
			got.OnSame != protocols.CodeReplayDetected || got.OnConflict != protocols.CodeReplayDetected {
			t.Errorf("claim %d = %+v, want kind %s key %q", i, got, c.kind, c.key)
		}
	}
}

// TestSignVectors checks the canonical bytes and signatures made by node +
// Python cryptography (gen.py) and the published AIRC vector.
func TestSignVectors(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(dir, "sign", "*.json"))
	if len(files) < 4 {
		t.Fatalf("found %d sign vectors", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			v, err := canonjson.ParseObject(b)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := canonjson.JS(v["message"])
			if err != nil {
				t.Fatal(err)
			}
			canon, err := SigningBytes(msg)
			if err != nil {
				t.Fatal(err)
			}
			if string(canon) != v["canonical"].(string) {
				t.Errorf("canonical:\n got %s\nwant %s", canon, v["canonical"])
			}
			pub, err := ParseKey(v["public_key"].(string))
			if err != nil {
				t.Fatal(err)
			}
			sig, _ := base64.StdEncoding.DecodeString(v["signature"].(string))
			if !ed25519.Verify(pub, canon, sig) {
				t.Errorf("published signature does not verify")
			}
			seedB64, ok := v["seed"].(string)
			if !ok {
				return // published vector: verify only
			}
			seed, _ := base64.StdEncoding.DecodeString(seedB64)
			out, err := Sign(msg, ed25519.NewKeyFromSeed(seed))
			if err != nil {
				t.Fatal(err)
			}
			m, err := canonjson.ParseObject(out)
			if err != nil {
				t.Fatal(err)
			}
			if m["signature"] != v["signature"] {
				t.Errorf("signature = %v, want %v", m["signature"], v["signature"])
			}
			if !bytes.HasPrefix(out, []byte("{")) || !bytes.Contains(out, []byte(`"signature":"`)) {
				t.Errorf("output %s", out)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xfb}, 32)
	spki := append(append([]byte{}, spkiPrefix...), raw...)
	good := []string{
		base64.StdEncoding.EncodeToString(raw),
		base64.RawStdEncoding.EncodeToString(raw),
		base64.URLEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw),
		"ed25519:" + base64.StdEncoding.EncodeToString(raw),
		base64.StdEncoding.EncodeToString(spki),
		" ed25519:" + base64.RawURLEncoding.EncodeToString(spki) + "\n",
	}
	for _, s := range good {
		k, err := ParseKey(s)
		if err != nil || !bytes.Equal(k, raw) {
			t.Errorf("ParseKey(%q) = %x, %v", s, k, err)
		}
	}
	bad := []string{"", "!!!", base64.StdEncoding.EncodeToString(raw[:31]),
		base64.StdEncoding.EncodeToString(append([]byte{1}, spki[1:]...))}
	for _, s := range bad {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

func TestConsent(t *testing.T) {
	tests := []struct {
		file             string
		from, to, action string
		ok               bool
	}{
		{"valid_handshake.json", "alice", "bob", "request", true},
		{"valid_body.json", "", "", "", false},
		{"handshake_bad_action.json", "", "", "", false},
		{"invalid_json.json", "", "", "", false},
	}
	for _, tc := range tests {
		doc, err := os.ReadFile(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		from, to, action, ok := Consent(doc)
		if from != tc.from || to != tc.to || action != tc.action || ok != tc.ok {
			t.Errorf("%s: Consent = %q %q %q %v", tc.file, from, to, action, ok)
		}
	}
}

func TestSignBadInput(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	if _, err := Sign([]byte(`[1]`), priv); err == nil {
		t.Error("Sign accepted an array")
	}
	if _, err := Sign([]byte(`{}`), priv[:10]); err != ErrBadPrivateKey {
		t.Errorf("short key: %v", err)
	}
}

func FuzzAICP(f *testing.F) {
	for _, b := range vectors.Docs(f, dir) {
		f.Add(b)
	}
	keys := loadKeys(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := Validate(doc, Options{Keys: keys, Now: time.Unix(defaultNow, 0)})
		if r.Valid != (len(r.Errors) == 0) || r.Protocol != "aicp" {
			t.Fatalf("inconsistent report %+v", r)
		}
		vectors.CheckProblems(t, r)
	})
}
