package tunnelsign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols/vacant"
)

func TestParseEd25519Key(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, 32))
	for _, c := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), true},
		{"base64", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n", true},
		{"base64url raw", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc", true},
		{"hex seed", hex.EncodeToString(priv.Seed()), true},
		{"hex seed+public", hex.EncodeToString(priv), true},
		{"mismatched public half", hex.EncodeToString(append(priv.Seed(), other.Public().(ed25519.PublicKey)...)), false},
		{"short", hex.EncodeToString([]byte{1, 2, 3}), false},
		{"garbage", "not a key!", false},
		{"bad pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", false},
	} {
		k, err := ParseEd25519Key([]byte(c.in), "k")
		if c.ok != (err == nil) || (c.ok && !k.Equal(priv)) {
			t.Errorf("%s: key %v, err %v", c.name, k != nil, err)
		}
		if err != nil && !errors.Is(err, ErrKeyFile) {
			t.Errorf("%s: %v does not wrap ErrKeyFile", c.name, err)
		}
	}
}

func TestFillAndChain(t *testing.T) {
	now := time.Unix(1778068800, 0)
	m := map[string]any{"id": "msg_mine"}
	FillAICP(m, now)
	if m["v"] != "0.1" || m["id"] != "msg_mine" || m["timestamp"] != int64(1778068800) || len(m["nonce"].(string)) != 32 {
		t.Errorf("filled %v", m)
	}
	if seq, prev := VacantNext(0, ""); seq != 1 || prev != vacant.ZeroHash {
		t.Errorf("empty chain: %d %s", seq, prev)
	}
	if seq, prev := VacantNext(4, "abc"); seq != 5 || prev != "abc" {
		t.Errorf("chain: %d %s", seq, prev)
	}
	if u := RandomUUID(); len(u) != 36 || u[14] != '4' {
		t.Errorf("uuid %s", u)
	}
}

// FuzzParseEd25519Key: any key file gives a key or an ErrKeyFile error.
func FuzzParseEd25519Key(f *testing.F) {
	f.Add([]byte("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcH\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("0707"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseEd25519Key(b, "k")
		if err != nil {
			if !errors.Is(err, ErrKeyFile) {
				t.Fatalf("error %v does not wrap ErrKeyFile", err)
			}
			return
		}
		if len(k) != ed25519.PrivateKeySize {
			t.Fatalf("key of %d bytes", len(k))
		}
	})
}
