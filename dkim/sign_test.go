package dkim

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testSigners loads the test keys: "rsa" (2048-bit PKCS#1), "ed25519".
func testSigners(t testing.TB) map[string]Signer {
	t.Helper()
	rsaKey, err := LoadKey(testdata + "keys/rsa2048-pkcs1.pem")
	if err != nil {
		t.Fatal(err)
	}
	edKey, err := LoadKey(testdata + "keys/ed25519.pem")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Signer{
		"rsa":     {Domain: "lab.test", Selector: "rsa1", Key: rsaKey},
		"ed25519": {Domain: "lab.test", Selector: "ed1", Key: edKey},
	}
}

// resolverFor publishes the public keys of signers.
func resolverFor(t testing.TB, signers ...Signer) *StaticResolver {
	t.Helper()
	var b strings.Builder
	for _, s := range signers {
		line, err := TXTRecord(s.Domain, s.Selector, s.Key.Public())
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	r, err := ParseStatic(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSignRoundTrip signs every testdata/dkim/sign/NAME.eml with rsa,
// ed25519 and both, checks the h= list against NAME.h and the wire form, and
// verifies the result.
func TestSignRoundTrip(t *testing.T) {
	keys := testSigners(t)
	files, _ := filepath.Glob(testdata + "sign/*.eml")
	if len(files) == 0 {
		t.Fatal("no cases")
	}
	combos := map[string][]Signer{
		"rsa":         {keys["rsa"]},
		"ed25519":     {keys["ed25519"]},
		"ed25519+rsa": {keys["ed25519"], keys["rsa"]},
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".eml")
		wantH := strings.TrimSpace(string(readFile(t, strings.TrimSuffix(f, ".eml")+".h")))
		raw := readFile(t, f)
		for combo, signers := range combos {
			t.Run(name+"/"+combo, func(t *testing.T) {
				out, err := Sign(raw, signers...)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasSuffix(out, []byte("\r\n")) {
					t.Error("output does not end in CRLF")
				}
				if n, m := bytes.Count(out, []byte("\n")), bytes.Count(out, []byte("\r\n")); n != m {
					t.Errorf("%d bare LF in output", n-m)
				}
				fields, _ := headerFields(out)
				for i, s := range signers {
					if !strings.EqualFold(fields[i].name, "DKIM-Signature") {
						t.Fatalf("field %d is %q, want DKIM-Signature", i, fields[i].name)
					}
					tg := tags(fields[i].value)
					want := map[string]string{"d": s.Domain, "s": s.Selector, "c": "relaxed/relaxed", "h": wantH}
					for k, v := range want {
						if tg[k] != v {
							t.Errorf("signature %d: %s=%q, want %q", i, k, tg[k], v)
						}
					}
					if _, ok := tg["l"]; ok {
						t.Errorf("signature %d has l=", i)
					}
				}
				res, err := (&Verifier{Resolver: resolverFor(t, signers...)}).Verify(context.Background(), out)
				if err != nil {
					t.Fatal(err)
				}
				if len(res) != len(signers) || !AllPass(res) {
					t.Errorf("verify: %+v", res)
				}
			})
		}
	}
}

// TestSignTamper checks what the signature protects: a prepended From (the
// oversigning), a changed body line, a changed Subject.
func TestSignTamper(t *testing.T) {
	keys := testSigners(t)
	signers := []Signer{keys["ed25519"], keys["rsa"]}
	out, err := Sign(readFile(t, testdata+"sign/envelopay-lf.eml"), signers...)
	if err != nil {
		t.Fatal(err)
	}
	v := &Verifier{Resolver: resolverFor(t, signers...)}
	for _, tc := range []struct {
		name   string
		tamper func([]byte) []byte
		reason string
	}{
		{"untouched", func(b []byte) []byte { return b }, ""},
		{"extra From on top", func(b []byte) []byte { return append([]byte("From: Mallory <m@evil.test>\r\n"), b...) },
			"signature did not verify"},
		{"extra From below", func(b []byte) []byte {
			return bytes.Replace(b, []byte("X-Mailer:"), []byte("From: Mallory <m@evil.test>\r\nX-Mailer:"), 1)
		}, "signature did not verify"},
		{"body line changed", func(b []byte) []byte { return bytes.Replace(b, []byte("12.50"), []byte("99.50"), 1) },
			"body hash did not verify"},
		{"subject changed", func(b []byte) []byte { return bytes.Replace(b, []byte("PAY | lunch"), []byte("PAY | dinner"), 1) },
			"signature did not verify"},
		{"unsigned header added", func(b []byte) []byte { return append(b[:0:0], append([]byte("X-Spam: no\r\n"), b...)...) }, ""},
		{"whitespace changed (relaxed)", func(b []byte) []byte {
			return bytes.Replace(b, []byte("Subject: PAY | lunch"), []byte("Subject:   PAY  |   lunch"), 1)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := v.Verify(context.Background(), tc.tamper(bytes.Clone(out)))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if tc.reason == "" && r.Result != Pass || tc.reason != "" && (r.Result != Fail || !strings.HasPrefix(r.Error, tc.reason)) {
					t.Errorf("%s: %s %q, want %q", r.Algorithm, r.Result, r.Error, tc.reason)
				}
			}
		})
	}
}

func TestSignErrors(t *testing.T) {
	keys := testSigners(t)
	weak, err := ParseKey(readFile(t, testdata+"keys/rsa512.pem"))
	if !errors.Is(err, ErrKeyTooWeak) || weak != nil {
		t.Fatalf("rsa512: %v", err)
	}
	ok := []byte("From: a@lab.test\r\n\r\nhi\r\n")
	for _, tc := range []struct {
		name    string
		raw     []byte
		signers []Signer
		want    error
	}{
		{"no signer", ok, nil, ErrNoSigner},
		{"no From", []byte("To: b@lab.test\r\n\r\nhi\r\n"), []Signer{keys["rsa"]}, ErrNoFrom},
		{"empty", nil, []Signer{keys["rsa"]}, ErrNoFrom},
		{"two From", []byte("From: a@lab.test\r\nFrom: m@evil.test\r\n\r\nhi\r\n"), []Signer{keys["rsa"]}, ErrManyFrom},
		{"leading space", []byte(" From: a@lab.test\r\n\r\nhi\r\n"), []Signer{keys["rsa"]}, ErrBadHeader},
		{"no colon", []byte("From: a@lab.test\r\ngarbage\r\n\r\nhi\r\n"), []Signer{keys["rsa"]}, ErrBadHeader},
		{"empty name", []byte("From: a@lab.test\r\n: x\r\n\r\nhi\r\n"), []Signer{keys["rsa"]}, ErrBadHeader},
		{"no domain", ok, []Signer{{Selector: "s", Key: keys["rsa"].Key}}, ErrBadSigner},
		{"no selector", ok, []Signer{{Domain: "d", Key: keys["rsa"].Key}}, ErrBadSigner},
		{"no key", ok, []Signer{{Domain: "d", Selector: "s"}}, ErrBadSigner},
		{"unsupported key", ok, []Signer{{Domain: "d", Selector: "s", Key: ecKey(t)}}, ErrKeyType},
	} {
		out, err := Sign(tc.raw, tc.signers...)
		if !errors.Is(err, tc.want) || out != nil {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestToCRLF(t *testing.T) {
	for in, want := range map[string]string{
		"":              "\r\n",
		"a":             "a\r\n",
		"a\n":           "a\r\n",
		"a\r\n":         "a\r\n",
		"a\nb\r\nc\n\n": "a\r\nb\r\nc\r\n\r\n",
		"a\r":           "a\r\n",
		"\n\n":          "\r\n\r\n",
	} {
		if got := string(toCRLF([]byte(in))); got != want {
			t.Errorf("toCRLF(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSignedKeys(t *testing.T) {
	fields, _ := headerFields([]byte("From: a\r\nfrom: b\r\nReceived: x\r\nx-envelopay-type: PAY\r\n\r\n"))
	want := []string{"From", "From", "From", "X-Envelopay-Type"}
	if got := signedKeys(fields); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func ecKey(t testing.TB) crypto.Signer {
	t.Helper()
	// ParseKey refuses EC keys; parse it directly to get a crypto.Signer.
	k, err := parsePKCS8ForTest(readFile(t, testdata+"keys/ec-p256.pem"))
	if err != nil {
		t.Fatal(fmt.Errorf("ec key: %w", err))
	}
	return k
}
