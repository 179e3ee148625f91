package mailout

import (
	"encoding/json"
	"testing"

	"github.com/emersion/go-message/mail"
)

var benchDraft = Draft{
	From: &mail.Address{Address: "alice@alice.test"},
	To:   []*mail.Address{{Address: "worker@example.test"}},
	Type: "ORDER", Note: "Review PR #417",
	Body: json.RawMessage(`{"id":"ord_4vJ9","task":{"description":"Review PR #417","repo":"github.com/alice/widget"},"amount":"8000000","token":"USDC","chain":"base","proof":{"tx":"0x9c4e"}}`),
}

// BenchmarkCompose: compose with validation and the parse self-check.
func BenchmarkCompose(b *testing.B) {
	for b.Loop() {
		if _, err := Compose(benchDraft); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkComposeSign: compose and sign with Ed25519 and RSA-2048.
func BenchmarkComposeSign(b *testing.B) {
	signers := signersFor("alice.test")
	for b.Loop() {
		raw, err := Compose(benchDraft)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Sign(raw, signers); err != nil {
			b.Fatal(err)
		}
	}
}
