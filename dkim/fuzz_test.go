package dkim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"testing"
)

func seedFiles(f *testing.F, pattern string) {
	files, _ := filepath.Glob(testdata + pattern)
	if len(files) == 0 {
		f.Fatalf("no seeds for %s", pattern)
	}
	for _, p := range files {
		f.Add(readFile(f, p))
	}
}

var resultWords = map[string]bool{Pass: true, Fail: true, PermError: true, TempError: true, Neutral: true}

// FuzzVerify: any input gives one result per DKIM-Signature field (as
// go-msgauth sees them), with a valid result word, and never an error.
func FuzzVerify(f *testing.F) {
	seedFiles(f, "verify/*.eml")
	r := testResolver(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		res, err := (&Verifier{Resolver: r}).Verify(context.Background(), raw)
		if err != nil {
			t.Fatalf("error %v", err)
		}
		fields, _ := headerFields(raw)
		if n := countFields(fields, "DKIM-Signature"); len(res) != n {
			t.Fatalf("%d results for %d signatures", len(res), n)
		}
		for _, x := range res {
			if !resultWords[x.Result] || (x.Result == Pass) != (x.Error == "") {
				t.Fatalf("bad result %+v", x)
			}
		}
	})
}

// FuzzSignVerify: whatever Sign accepts, Verify passes.
func FuzzSignVerify(f *testing.F) {
	seedFiles(f, "sign/*.eml")
	seedFiles(f, "verify/*.eml")
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	s := Signer{Domain: "lab.test", Selector: "ed1", Key: key}
	r := resolverFor(f, s)
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := Sign(raw, s)
		if err != nil {
			if !errors.Is(err, ErrNoFrom) && !errors.Is(err, ErrManyFrom) && !errors.Is(err, ErrBadHeader) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		res, err := (&Verifier{Resolver: r}).Verify(context.Background(), out)
		if err != nil || len(res) == 0 || res[0].Result != Pass {
			t.Fatalf("signed message does not verify: %+v %v\n%q", res, err, out)
		}
	})
}

// FuzzParseKey: bad key files give one of the typed key errors.
func FuzzParseKey(f *testing.F) {
	seedFiles(f, "keys/*.pem")
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKey(data)
		if err == nil {
			if k == nil {
				t.Fatal("nil key without error")
			}
			return
		}
		for _, e := range []error{ErrKeyNotPEM, ErrKeyEncrypted, ErrKeyType, ErrKeyMalformed, ErrKeyTooWeak} {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("untyped error %v", err)
	})
}
