package dkim

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
)

// benchVerify verifies one signed message b.N times through a DNSResolver
// whose cache is warm (the key record is fetched once), the steady state of
// a receiver getting many messages from one selector.
func benchVerify(b *testing.B, algo string) {
	s := testSigners(b)[algo]
	msg, err := Sign(readFile(b, testdata+"sign/envelopay-lf.eml"), s)
	if err != nil {
		b.Fatal(err)
	}
	static := resolverFor(b, s)
	dns := NewDNSResolver(0, 1<<62)
	dns.lookup = static.LookupTXT
	v := &Verifier{Resolver: dns}
	ctx := context.Background()
	if res, _ := v.Verify(ctx, msg); !AllPass(res) { // warms the cache
		b.Fatalf("%+v", res)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := v.Verify(ctx, msg)
		if err != nil || res[0].Result != Pass {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkVerifyRSA2048(b *testing.B) { benchVerify(b, "rsa") }
func BenchmarkVerifyEd25519(b *testing.B) { benchVerify(b, "ed25519") }

// BenchmarkParseKeyRSA2048 measures what a parsed-key cache would save per
// message: go-msgauth decodes and parses the key record on each
// verification (base64 + PKIX parse). Compare with BenchmarkVerifyRSA2048.
func BenchmarkParseKeyRSA2048(b *testing.B) {
	line, err := TXTRecord("lab.test", "rsa1", testSigners(b)["rsa"].Key.Public())
	if err != nil {
		b.Fatal(err)
	}
	p := line[strings.Index(line, "p=")+2:]
	b.ReportAllocs()
	for range b.N {
		der, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			b.Fatal(err)
		}
		k, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := k.(*rsa.PublicKey); !ok {
			b.Fatal("not rsa")
		}
	}
}
