package proof

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type vector struct {
	Group   string          `json:"group"`
	Chain   string          `json:"chain"`
	Proof   json.RawMessage `json:"proof"`
	Tx      string          `json:"tx"`
	Warning string          `json:"warning"`
	None    bool            `json:"none"`
}

func TestIdentityVectors(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/identity.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []vector `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	byGroup := map[string]string{} // group → fingerprint
	groupOf := map[string]string{} // fingerprint → group
	for i, c := range file.Cases {
		id := Identify(c.Chain, c.Proof)
		name := c.Group + "/" + string(c.Proof)
		if c.None {
			if id.Fingerprint != "" {
				t.Errorf("%d %s: fingerprint %q, want none", i, name, id.Fingerprint)
			}
			continue
		}
		if id.Tx != c.Tx || id.Warning != c.Warning {
			t.Errorf("%d %s: tx %q warning %q, want %q %q", i, name, id.Tx, id.Warning, c.Tx, c.Warning)
		}
		if (id.Warning == "") != (id.Detail == "") {
			t.Errorf("%d %s: warning %q with detail %q", i, name, id.Warning, id.Detail)
		}
		if id.Chain != strings.ToLower(strings.TrimSpace(c.Chain)) {
			t.Errorf("%d %s: chain %q", i, name, id.Chain)
		}
		if len(id.Fingerprint) != 64 {
			t.Errorf("%d %s: fingerprint %q", i, name, id.Fingerprint)
		}
		if fp, ok := byGroup[c.Group]; ok && fp != id.Fingerprint {
			t.Errorf("%d %s: fingerprint differs from its group's", i, name)
		}
		if g, ok := groupOf[id.Fingerprint]; ok && g != c.Group {
			t.Errorf("%d %s: same fingerprint as group %s", i, name, g)
		}
		byGroup[c.Group], groupOf[id.Fingerprint] = id.Fingerprint, c.Group
	}
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	for chain, want := range map[string]string{
		"solana": KindSolana, " Solana-Devnet": KindSolana, "solana-testnet": KindSolana,
		"solana-mainnet": KindEVM, "base": KindEVM, "": KindEVM, "ethereum": KindEVM,
	} {
		if got := KindOf(chain); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", chain, got, want)
		}
	}
}

func FuzzIdentify(f *testing.F) {
	for _, s := range []string{`{"tx":"0xabcdef0123"}`, `"0xABCDEF"`, `{"signature":"4MQy5mMut4eTegju14q1NxdBxZbdXU5e54Bxc4gg1ziBvPXLNK3CeXM1zLLP8LpJzYkH7FHYUoarZMaVGUG1FK3d"}`,
		`null`, `[1,2]`, `{"hash":""}`, `"1111"`,
		// At the length bound, with and without the 0x prefix.
		`"` + strings.Repeat("0", 254) + `"`, `"` + strings.Repeat("0", 255) + `"`, `"0x` + strings.Repeat("0", 254) + `"`} {
		f.Add("base", []byte(s))
		f.Add("solana", []byte(s))
	}
	f.Fuzz(func(t *testing.T, chain string, proof []byte) {
		id := Identify(chain, proof)
		if id.Fingerprint == "" {
			return
		}
		if len(id.Fingerprint) != 64 {
			t.Fatalf("fingerprint %q", id.Fingerprint)
		}
		if id.Tx != "" {
			// Idempotent: the normalised transaction names itself.
			again := Identify(chain, mustJSON(t, id.Tx))
			if again.Fingerprint != id.Fingerprint || again.Tx != id.Tx {
				t.Fatalf("not idempotent: %q → %q, %q", proof, id.Tx, again.Tx)
			}
			if id.Kind == KindEVM && id.Tx != strings.ToLower(id.Tx) {
				t.Fatalf("EVM tx not lower case: %q", id.Tx)
			}
		} else if id.Warning != WarnUnrecognised {
			t.Fatalf("no tx and warning %q", id.Warning)
		}
	})
}

func mustJSON(t *testing.T, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkIdentify: the identity of a typical EVM proof object, per
// received PAY (on the ingest path, before the store).
func BenchmarkIdentify(b *testing.B) {
	p := json.RawMessage(`{"tx":"0x7a3f9e2b41c08d5e6f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70"}`)
	b.ReportAllocs()
	for b.Loop() {
		if Identify("base", p).Tx == "" {
			b.Fatal("no tx")
		}
	}
}
