package dkim

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"testing"
)

func parsePKCS8ForTest(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	return k.(crypto.Signer), nil
}

func TestLoadKey(t *testing.T) {
	for _, tc := range []struct {
		file string
		algo string // "rsa" or "ed25519" when it loads
		err  error
	}{
		{"rsa2048-pkcs1.pem", "rsa", nil},
		{"rsa2048-pkcs8.pem", "rsa", nil},
		{"ed25519.pem", "ed25519", nil},
		{"rsa512.pem", "", ErrKeyTooWeak},
		{"ec-p256.pem", "", ErrKeyType},
		{"encrypted.pem", "", ErrKeyEncrypted},
		{"encrypted-pkcs1.pem", "", ErrKeyEncrypted},
		{"garbage.pem", "", ErrKeyNotPEM},
		{"public-only.pem", "", ErrKeyPublic},
		{"public-only-pkcs1.pem", "", ErrKeyPublic},
		{"truncated.pem", "", ErrKeyMalformed},
		{"does-not-exist.pem", "", os.ErrNotExist},
	} {
		path := testdata + "keys/" + tc.file
		k, err := LoadKey(path)
		if tc.err != nil {
			var ke *KeyError
			if !errors.Is(err, tc.err) || !errors.As(err, &ke) || ke.Path != path || k != nil {
				t.Errorf("%s: %v, want KeyError wrapping %v", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		switch k.(type) {
		case *rsa.PrivateKey:
			if tc.algo != "rsa" {
				t.Errorf("%s: got RSA", tc.file)
			}
		case ed25519.PrivateKey:
			if tc.algo != "ed25519" {
				t.Errorf("%s: got Ed25519", tc.file)
			}
		default:
			t.Errorf("%s: got %T", tc.file, k)
		}
	}
	a, _ := LoadKey(testdata + "keys/rsa2048-pkcs1.pem")
	b, _ := LoadKey(testdata + "keys/rsa2048-pkcs8.pem")
	if !a.(*rsa.PrivateKey).Equal(b) {
		t.Error("PKCS#1 and PKCS#8 forms of one key differ")
	}
}

func TestGenerateMarshalKey(t *testing.T) {
	for _, tc := range []struct{ algo, k string }{{"rsa", "rsa"}, {"ed25519", "ed25519"}} {
		k, err := GenerateKey(tc.algo)
		if err != nil {
			t.Fatal(err)
		}
		if rk, ok := k.(*rsa.PrivateKey); ok && rk.N.BitLen() != 2048 {
			t.Errorf("rsa key has %d bits", rk.N.BitLen())
		}
		p, err := MarshalKeyPEM(k)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(p), "-----BEGIN PRIVATE KEY-----\n") {
			t.Errorf("%s: not PKCS#8 PEM: %.40q", tc.algo, p)
		}
		back, err := ParseKey(p)
		if err != nil {
			t.Fatal(err)
		}
		if !back.(interface{ Equal(crypto.PrivateKey) bool }).Equal(k) {
			t.Errorf("%s: key changed in a PEM round trip", tc.algo)
		}
		line, err := TXTRecord("lab.test", "s1", k.Public())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(line, "s1._domainkey.lab.test v=DKIM1; k="+tc.k+"; p=") {
			t.Errorf("TXT line %q", line)
		}
	}
	if _, err := GenerateKey("dsa"); !errors.Is(err, ErrUnknownAlgo) {
		t.Errorf("dsa: %v", err)
	}
}

func TestTXTRecord(t *testing.T) {
	// RFC 8463 Appendix A.1/A.2: the private key seed and the record.
	seed, _ := base64.StdEncoding.DecodeString("nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=")
	pub := ed25519.NewKeyFromSeed(seed).Public()
	got, err := TXTRecord("football.example.com", "brisbane", pub)
	want := "brisbane._domainkey.football.example.com v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
	if err != nil || got != want {
		t.Errorf("got %q, %v\nwant %q", got, err, want)
	}
	// RFC 6376 Appendix C: the private key of C.1 gives the key of C.2 as
	// corrected by erratum 3192.
	k, err := LoadKey(testdata + "rfc6376-c.key")
	if err != nil {
		t.Fatal(err)
	}
	got, err = TXTRecord("example.com", "brisbane", k.Public())
	r := testResolver(t)
	txt, _ := r.records["brisbane._domainkey.example.com"]
	if err != nil || len(txt) != 1 || got != "brisbane._domainkey.example.com "+strings.Replace(txt[0], "v=DKIM1; ", "v=DKIM1; k=rsa; ", 1) {
		t.Errorf("got %q, %v; keys.txt has %q", got, err, txt)
	}
	if _, err := TXTRecord("d", "s", "not a key"); !errors.Is(err, ErrKeyType) {
		t.Errorf("string key: %v", err)
	}
	if _, err := TXTRecord("", "s", pub); !errors.Is(err, ErrBadSigner) {
		t.Errorf("no domain: %v", err)
	}
}

// TestParseKeyPublic: a public key where the private key is needed says so
// (it used to be "no PEM block found"), and stays an ErrKeyType.
func TestParseKeyPublic(t *testing.T) {
	for _, f := range []string{"public-only.pem", "public-only-pkcs1.pem"} {
		data, err := os.ReadFile(testdata + "keys/" + f)
		if err != nil {
			t.Fatal(err)
		}
		k, err := ParseKey(data)
		if k != nil || !errors.Is(err, ErrKeyPublic) || !errors.Is(err, ErrKeyType) || errors.Is(err, ErrKeyNotPEM) {
			t.Errorf("%s: %v, want ErrKeyPublic", f, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "public key") || !strings.Contains(msg, "private key") {
			t.Errorf("%s: message %q does not say a private key is needed", f, msg)
		}
	}
	// A private key after a public one in the same file still loads.
	pub, _ := os.ReadFile(testdata + "keys/public-only.pem")
	priv, _ := os.ReadFile(testdata + "keys/ed25519.pem")
	if _, err := ParseKey(append(pub, priv...)); err != nil {
		t.Errorf("public then private: %v", err)
	}
}
