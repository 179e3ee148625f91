package senderauth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/envelopd/envelopd/dkim"
)

// arcSignedFields are the fields an ARC-Message-Signature covers when the
// message has them (RFC 8617 §4.1.2: as DKIM; never ARC fields), From
// first.
var arcSignedFields = []string{"from", "to", "cc", "subject", "date", "message-id", "in-reply-to",
	"references", "mime-version", "content-type", "content-transfer-encoding", "dkim-signature"}

// ErrARCFull is returned by SealARC for a message whose chain already has
// 50 instances (RFC 8617 §4.2.1).
var ErrARCFull = errors.New("arc: the chain already has 50 instances")

// SealARC adds an ARC set to raw (RFC 8617 §5.1): ARC-Authentication-
// Results i=N carrying authResults (an Authentication-Results value after
// its authserv-id: "authserv-id; method=result …"), an ARC-Message-
// Signature and an ARC-Seal by s, relaxed/relaxed, with N one more than
// the chain's newest instance and cv the chain's state as verified
// through r (none for the first set). t is the signing time. It returns
// the sealed message (the three fields prepended, newest first).
func SealARC(ctx context.Context, r Resolver, raw []byte, authResults string, s dkim.Signer, t time.Time) ([]byte, error) {
	chain := VerifyARC(ctx, r, raw)
	n := len(chain.Sealers) + 1
	cv := "none"
	switch {
	case chain.Result == Fail:
		// §5.1.2: a chain that failed is sealed with cv=fail (and so
		// ends); its sets may be malformed, so the instance counts on.
		cv = "fail"
		n = max(n, maxInstance(raw)+1)
	case n > 1:
		cv = "pass"
	}
	if n > maxARCInstances {
		return nil, ErrARCFull
	}
	algo, err := sigAlgorithm(s.Key)
	if err != nil {
		return nil, err
	}
	fields, body := splitMessage(raw)
	ts := t.Unix()

	aar := &field{name: "ARC-Authentication-Results"}
	aar.value = fmt.Sprintf(" i=%d; %s", n, strings.TrimSpace(authResults))
	aar.raw = []byte(aar.name + ":" + aar.value + "\r\n")

	// The message signature: the present fields of arcSignedFields, each
	// name once per occurrence, bottom-up (RFC 6376 §5.4.2).
	var names []string
	count := map[string]int{}
	for _, f := range fields {
		count[strings.ToLower(f.name)]++
	}
	for _, name := range arcSignedFields {
		for range count[name] {
			names = append(names, name)
		}
	}
	bh := sha256.Sum256(canonBody(body, "relaxed"))
	ams := &field{name: "ARC-Message-Signature"}
	ams.value = fmt.Sprintf(" i=%d; a=%s; c=relaxed/relaxed; d=%s; s=%s; t=%d;\r\n\th=%s;\r\n\tbh=%s; b=",
		n, algo, s.Domain, s.Selector, ts, strings.Join(names, ":"), base64.StdEncoding.EncodeToString(bh[:]))
	ams.raw = []byte(ams.name + ":" + ams.value + "\r\n")
	var data bytes.Buffer
	used := map[*field]bool{}
	for _, name := range names {
		for i := len(fields) - 1; i >= 0; i-- {
			if f := fields[i]; !used[f] && strings.EqualFold(f.name, name) {
				used[f] = true
				data.Write(canonHeader(f, "relaxed"))
				break
			}
		}
	}
	data.Write(bytes.TrimSuffix(canonHeader(ams, "relaxed"), []byte("\r\n")))
	sig, err := sign(s.Key, data.Bytes())
	if err != nil {
		return nil, err
	}
	ams = withB(ams, sig)

	// The seal: every set 1…n, this one's seal with b= empty.
	sets := map[int]*arcSet{}
	for _, f := range fields {
		lname := strings.ToLower(f.name)
		if lname != "arc-authentication-results" && lname != "arc-message-signature" && lname != "arc-seal" {
			continue
		}
		i, ok := instance(lname, f.value)
		if !ok || i < 1 || i >= n {
			continue
		}
		if sets[i] == nil {
			sets[i] = &arcSet{}
		}
		switch lname {
		case "arc-authentication-results":
			sets[i].aar = f
		case "arc-message-signature":
			sets[i].ams = f
		default:
			sets[i].seal = f
		}
	}
	seal := &field{name: "ARC-Seal"}
	seal.value = fmt.Sprintf(" i=%d; a=%s; cv=%s; d=%s; s=%s; t=%d; b=", n, algo, cv, s.Domain, s.Selector, ts)
	seal.raw = []byte(seal.name + ":" + seal.value + "\r\n")
	data.Reset()
	if cv != "fail" { // §5.1.1: a cv=fail seal covers its own set only
		for j := 1; j < n; j++ {
			if set := sets[j]; set != nil && set.aar != nil && set.ams != nil && set.seal != nil {
				data.Write(canonHeader(set.aar, "relaxed"))
				data.Write(canonHeader(set.ams, "relaxed"))
				data.Write(canonHeader(set.seal, "relaxed"))
			}
		}
	}
	data.Write(canonHeader(aar, "relaxed"))
	data.Write(canonHeader(ams, "relaxed"))
	data.Write(bytes.TrimSuffix(canonHeader(seal, "relaxed"), []byte("\r\n")))
	sig, err = sign(s.Key, data.Bytes())
	if err != nil {
		return nil, err
	}
	seal = withB(seal, sig)

	out := make([]byte, 0, len(raw)+len(seal.raw)+len(ams.raw)+len(aar.raw))
	out = append(out, seal.raw...)
	out = append(out, ams.raw...)
	out = append(out, aar.raw...)
	return append(out, raw...), nil
}

// maxInstance is the highest i= of raw's ARC fields (0 when none).
func maxInstance(raw []byte) int {
	fields, _ := splitMessage(raw)
	n := 0
	for _, f := range fields {
		lname := strings.ToLower(f.name)
		if strings.HasPrefix(lname, "arc-") {
			if i, ok := instance(lname, f.value); ok && i <= maxARCInstances {
				n = max(n, i)
			}
		}
	}
	return n
}

// withB returns f with its (empty, final) b= tag filled with sig,
// folded at 72 characters.
func withB(f *field, sig []byte) *field {
	b := base64.StdEncoding.EncodeToString(sig)
	var v strings.Builder
	v.WriteString(f.value)
	for len(b) > 0 {
		n := min(len(b), 72)
		v.WriteString("\r\n\t" + b[:n])
		b = b[n:]
	}
	out := &field{name: f.name, value: v.String()}
	out.raw = []byte(out.name + ":" + out.value + "\r\n")
	return out
}

func sigAlgorithm(k crypto.Signer) (string, error) {
	switch k.Public().(type) {
	case *rsa.PublicKey:
		return "rsa-sha256", nil
	case ed25519.PublicKey:
		return "ed25519-sha256", nil
	}
	return "", errors.New("arc: unsupported key type (want RSA or Ed25519)")
}

// sign signs the SHA-256 of data: PKCS #1 v1.5 for RSA, Ed25519 over the
// hash for Ed25519 (RFC 8463 §3).
func sign(k crypto.Signer, data []byte) ([]byte, error) {
	h := sha256.Sum256(data)
	if _, ok := k.Public().(ed25519.PublicKey); ok {
		return k.Sign(rand.Reader, h[:], crypto.Hash(0))
	}
	return k.Sign(rand.Reader, h[:], crypto.SHA256)
}
