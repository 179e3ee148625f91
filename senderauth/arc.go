package senderauth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/emersion/go-msgauth/authres"
)

// ARC is the outcome of verifying a message's ARC chain (RFC 8617 §5.2).
type ARC struct {
	// Result is pass (every seal and the newest message signature
	// verified), fail, or none (no ARC header fields).
	Result string `json:"result"`
	// Sealers are the ARC-Seal d= domains, instance 1 first.
	Sealers []string `json:"sealers"`
	// TrustedSealer is the trusted sealer (--arc-trust) whose passing
	// chain vouched for the From domain; "" when none did.
	TrustedSealer string `json:"trusted_sealer,omitempty"`
	// Reason says why the result is not pass.
	Reason string `json:"reason,omitempty"`
}

// maxARCInstances is the highest instance allowed (RFC 8617 §4.2.1).
const maxARCInstances = 50

// arcSet is one ARC set (RFC 8617 §4.1): its three fields.
type arcSet struct {
	aar, ams, seal *field
	amsTags        map[string]string
	sealTags       map[string]string
}

// field is a header field as received: name and the whole raw field
// (name, colon, value, folding and the final CRLF).
type field struct {
	name  string
	raw   []byte
	value string // after the colon, unfolded only by reading
}

// VerifyARC verifies raw's ARC chain (RFC 8617 §5.2): the structure (one
// set per instance 1…N, N ≤ 50, cv=none at 1 and pass above, the newest
// cv not fail), the newest ARC-Message-Signature, then every ARC-Seal
// from the newest down. Keys are looked up through r as DKIM keys
// (RFC 8617 §4.1.2, RFC 6376 §3.6.2); rsa-sha256 and ed25519-sha256.
func VerifyARC(ctx context.Context, r Resolver, raw []byte) ARC {
	out := ARC{Result: None, Sealers: []string{}}
	if !hasARCField(raw) {
		return out // most mail: no ARC field, nothing to split
	}
	fields, body := splitMessage(raw)
	sets := map[int]*arcSet{}
	n := 0
	for _, f := range fields {
		var slot **field
		lname := strings.ToLower(f.name)
		switch lname {
		case "arc-authentication-results", "arc-message-signature", "arc-seal":
		default:
			continue
		}
		i, ok := instance(lname, f.value)
		if !ok || i < 1 || i > maxARCInstances {
			return arcFail(out, "an ARC header field has no valid i= instance")
		}
		s := sets[i]
		if s == nil {
			s = &arcSet{}
			sets[i] = s
		}
		switch lname {
		case "arc-authentication-results":
			slot = &s.aar
		case "arc-message-signature":
			slot = &s.ams
		default:
			slot = &s.seal
		}
		if *slot != nil {
			return arcFail(out, fmt.Sprintf("instance %d has two %s fields", i, f.name))
		}
		*slot = f
		n = max(n, i)
	}
	if len(sets) == 0 {
		return out
	}
	for i := 1; i <= n; i++ {
		s := sets[i]
		if s == nil || s.aar == nil || s.ams == nil || s.seal == nil {
			return arcFail(out, fmt.Sprintf("ARC set %d is missing or incomplete", i))
		}
		s.amsTags, s.sealTags = tagList(s.ams.value), tagList(s.seal.value)
		out.Sealers = append(out.Sealers, normDomain(s.sealTags["d"]))
	}
	// §5.2 step 2 and §5.1.1: the chain's validation states.
	if cv := strings.ToLower(sets[n].sealTags["cv"]); cv == "fail" {
		return arcFail(out, fmt.Sprintf("the newest seal (i=%d) says cv=fail", n))
	}
	for i := 1; i <= n; i++ {
		cv := strings.ToLower(sets[i].sealTags["cv"])
		if (i == 1 && cv != "none") || (i > 1 && cv != "pass") {
			return arcFail(out, fmt.Sprintf("ARC-Seal i=%d has cv=%s", i, cv))
		}
	}
	// §5.2 step 4: the newest message signature.
	if err := verifyAMS(ctx, r, fields, body, sets[n]); err != nil {
		return arcFail(out, fmt.Sprintf("ARC-Message-Signature i=%d: %v", n, err))
	}
	// Step 5: every seal, newest first.
	for i := n; i >= 1; i-- {
		if err := verifySeal(ctx, r, sets, i); err != nil {
			return arcFail(out, fmt.Sprintf("ARC-Seal i=%d: %v", i, err))
		}
	}
	out.Result = Pass
	return out
}

func arcFail(a ARC, why string) ARC {
	a.Result, a.Reason = Fail, why
	return a
}

// instance reads the i= tag: the first tag of ARC-Authentication-Results
// (§4.1.1), a tag anywhere in the others.
func instance(lname, value string) (int, bool) {
	if lname == "arc-authentication-results" {
		first, _, _ := strings.Cut(value, ";")
		k, v, ok := strings.Cut(first, "=")
		if !ok || strings.TrimSpace(stripFWS(k)) != "i" {
			return 0, false
		}
		i, err := strconv.Atoi(stripFWS(v))
		return i, err == nil
	}
	i, err := strconv.Atoi(tagList(value)["i"])
	return i, err == nil
}

// trustedVouch returns the newest sealer of a passing chain when it is
// trusted and its ARC-Authentication-Results say the From domain from was
// authenticated when the mail reached it (a DMARC pass for from, or a
// passing DKIM signature aligned with it); "" otherwise. Only the newest
// sealer counts: an untrusted hop after a trusted one could have changed
// the message, and only the newest ARC-Message-Signature is verified
// (RFC 8617 §5.2; §7.2 leaves trust to the receiver).
func (c *Checker) trustedVouch(a ARC, raw []byte, from string) string {
	n := len(a.Sealers)
	if a.Result != Pass || n == 0 || !c.trusted(a.Sealers[n-1]) {
		return ""
	}
	fields, _ := splitMessage(raw)
	aar := ""
	for _, f := range fields {
		if strings.EqualFold(f.name, "ARC-Authentication-Results") {
			if i, ok := instance("arc-authentication-results", f.value); ok && i == n {
				_, aar, _ = strings.Cut(f.value, ";")
			}
		}
	}
	_, results, err := authres.Parse(unfold(aar))
	if err != nil {
		return ""
	}
	for _, res := range results {
		switch r := res.(type) {
		case *authres.DMARCResult:
			if r.Value == authres.ResultPass && normDomain(r.From) == normDomain(from) {
				return a.Sealers[n-1]
			}
		case *authres.DKIMResult:
			if r.Value == authres.ResultPass && IsAligned(r.Domain, from, "r") {
				return a.Sealers[n-1]
			}
		}
	}
	return ""
}

func (c *Checker) trusted(sealer string) bool {
	for _, t := range c.TrustedSealers {
		if t = normDomain(t); t != "" && sealer == t {
			return true
		}
	}
	return false
}

// verifyAMS checks an ARC-Message-Signature: body hash and signature over
// the fields it names (RFC 8617 §4.1.2: DKIM's rules, RFC 6376 §3.7).
func verifyAMS(ctx context.Context, r Resolver, fields []*field, body []byte, s *arcSet) error {
	t := s.amsTags
	hc, bc := "simple", "simple"
	if c := strings.ToLower(t["c"]); c != "" {
		h, b, ok := strings.Cut(c, "/")
		hc = h
		if ok {
			bc = b
		}
	}
	if (hc != "simple" && hc != "relaxed") || (bc != "simple" && bc != "relaxed") {
		return errors.New("unknown canonicalization " + t["c"])
	}
	if _, ok := t["l"]; ok {
		return errors.New("l= (body length) not accepted")
	}
	bh, err := base64.StdEncoding.DecodeString(stripFWS(t["bh"]))
	if err != nil {
		return errors.New("malformed bh=")
	}
	sum := sha256.Sum256(canonBody(body, bc))
	if !bytes.Equal(sum[:], bh) {
		return errors.New("body hash did not verify")
	}
	// The signed fields, each name taken from the bottom up (RFC 6376
	// §5.4.2); ARC fields are never signed (§4.1.2).
	var data bytes.Buffer
	used := map[*field]bool{}
	for _, name := range strings.Split(t["h"], ":") {
		name = strings.ToLower(stripFWS(name))
		if name == "" {
			continue
		}
		if strings.HasPrefix(name, "arc-") {
			return errors.New("h= names an ARC field")
		}
		for i := len(fields) - 1; i >= 0; i-- {
			f := fields[i]
			if !used[f] && strings.EqualFold(f.name, name) {
				used[f] = true
				data.Write(canonHeader(f, hc))
				break
			}
		}
	}
	data.Write(bytes.TrimSuffix(canonHeader(withoutB(s.ams), hc), []byte("\r\n")))
	return verifySig(ctx, r, t, data.Bytes())
}

// verifySeal checks ARC-Seal i: the signature over the ARC sets 1…i
// (AAR, AMS, AS each), relaxed header canonicalization, its own b= empty
// (RFC 8617 §5.1.1).
func verifySeal(ctx context.Context, r Resolver, sets map[int]*arcSet, i int) error {
	var data bytes.Buffer
	for j := 1; j <= i; j++ {
		s := sets[j]
		data.Write(canonHeader(s.aar, "relaxed"))
		data.Write(canonHeader(s.ams, "relaxed"))
		if j < i {
			data.Write(canonHeader(s.seal, "relaxed"))
		}
	}
	data.Write(bytes.TrimSuffix(canonHeader(withoutB(sets[i].seal), "relaxed"), []byte("\r\n")))
	return verifySig(ctx, r, sets[i].sealTags, data.Bytes())
}

// verifySig checks the b= of a tag list over data with the key at
// s=._domainkey.d=.
func verifySig(ctx context.Context, r Resolver, t map[string]string, data []byte) error {
	sig, err := base64.StdEncoding.DecodeString(stripFWS(t["b"]))
	if err != nil || len(sig) == 0 {
		return errors.New("malformed b=")
	}
	d, sel := normDomain(t["d"]), strings.TrimSpace(t["s"])
	if !isDomain(d) || sel == "" {
		return errors.New("no valid d= and s=")
	}
	key, err := lookupKey(ctx, r, sel+"._domainkey."+d)
	if err != nil {
		return err
	}
	h := sha256.Sum256(data)
	switch strings.ToLower(t["a"]) {
	case "rsa-sha256":
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return errors.New("a=rsa-sha256 with a non-RSA key")
		}
		if k.N.BitLen() < 1024 {
			return errors.New("RSA key shorter than 1024 bits (RFC 8301)")
		}
		if rsa.VerifyPKCS1v15(k, crypto.SHA256, h[:], sig) != nil {
			return errors.New("signature did not verify")
		}
	case "ed25519-sha256":
		k, ok := key.(ed25519.PublicKey)
		if !ok {
			return errors.New("a=ed25519-sha256 with a non-Ed25519 key")
		}
		if !ed25519.Verify(k, h[:], sig) {
			return errors.New("signature did not verify")
		}
	default:
		return fmt.Errorf("unsupported algorithm %q", t["a"])
	}
	return nil
}

// lookupKey fetches and parses a DKIM key record (RFC 6376 §3.6.1).
func lookupKey(ctx context.Context, r Resolver, name string) (crypto.PublicKey, error) {
	txts, err := r.LookupTXT(ctx, name)
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return nil, errors.New("no key at " + name)
		}
		return nil, fmt.Errorf("key lookup failed: %w", err)
	}
	if len(txts) != 1 {
		return nil, fmt.Errorf("%d key records at %s", len(txts), name)
	}
	t := tagList(txts[0])
	p := stripFWS(t["p"])
	if p == "" {
		return nil, errors.New("key revoked (empty p=)")
	}
	b, err := base64.StdEncoding.DecodeString(p)
	if err != nil {
		return nil, errors.New("malformed key p=")
	}
	switch strings.ToLower(t["k"]) {
	case "", "rsa":
		k, err := x509.ParsePKIXPublicKey(b)
		if err != nil {
			if rk, err2 := x509.ParsePKCS1PublicKey(b); err2 == nil {
				return rk, nil
			}
			return nil, errors.New("malformed RSA key")
		}
		return k, nil
	case "ed25519":
		if len(b) != ed25519.PublicKeySize {
			return nil, errors.New("malformed Ed25519 key")
		}
		return ed25519.PublicKey(b), nil
	}
	return nil, fmt.Errorf("unsupported key type k=%s", t["k"])
}

// hasARCField reports whether the header section of raw has a field whose
// name starts with "ARC-" (any case).
func hasARCField(raw []byte) bool {
	for len(raw) > 0 {
		if raw[0] == '\r' || raw[0] == '\n' {
			return false // the empty line: end of the header section
		}
		if len(raw) >= 4 && (raw[0]|0x20) == 'a' && (raw[1]|0x20) == 'r' && (raw[2]|0x20) == 'c' && raw[3] == '-' {
			return true
		}
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			return false
		}
		raw = raw[i+1:]
	}
	return false
}

// splitMessage splits raw into its header fields and body (after the
// empty line; nil when there is none).
func splitMessage(raw []byte) ([]*field, []byte) {
	var fields []*field
	var cur *field
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		line := raw
		if i >= 0 {
			line = raw[:i+1]
		}
		raw = raw[len(line):]
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return fields, raw
		}
		if (line[0] == ' ' || line[0] == '\t') && cur != nil {
			cur.raw = append(cur.raw, line...)
			cur.value += string(line)
			continue
		}
		c := bytes.IndexByte(line, ':')
		if c <= 0 {
			cur = nil
			continue
		}
		cur = &field{name: strings.TrimRight(string(line[:c]), " \t"), raw: append([]byte(nil), line...), value: string(line[c+1:])}
		fields = append(fields, cur)
	}
	return fields, nil
}

// withoutB returns f with the value of its b= tag emptied (RFC 6376
// §3.7), everything else as received.
func withoutB(f *field) *field {
	v := f.value
	out := ""
	for len(v) > 0 {
		part, rest, more := strings.Cut(v, ";")
		k, _, ok := strings.Cut(part, "=")
		if ok && stripFWS(k) == "b" {
			eq := strings.IndexByte(part, '=')
			part = part[:eq+1]
		}
		out += part
		if more {
			out += ";"
		}
		v = rest
		if !more {
			break
		}
	}
	raw := f.raw[:len(f.raw)-len(f.value)]
	return &field{name: f.name, raw: append(append([]byte(nil), raw...), out...), value: out}
}

// canonHeader canonicalizes one field (RFC 6376 §3.4.1, §3.4.2), ending
// in CRLF.
func canonHeader(f *field, how string) []byte {
	if how == "simple" {
		b := bytes.TrimRight(f.raw, "\r\n")
		return append(append([]byte(nil), b...), "\r\n"...)
	}
	v := strings.Join(strings.Fields(unfold(f.value)), " ")
	return []byte(strings.ToLower(strings.TrimSpace(f.name)) + ":" + v + "\r\n")
}

// canonBody canonicalizes a body (RFC 6376 §3.4.3, §3.4.4).
func canonBody(body []byte, how string) []byte {
	lines := bytes.Split(bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")), []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the split after the final line end
	}
	for len(lines) > 0 && len(trimWSP(lines[len(lines)-1], how)) == 0 {
		lines = lines[:len(lines)-1] // empty lines at the end are ignored
	}
	if len(lines) == 0 {
		if how == "relaxed" {
			return nil
		}
		return []byte("\r\n")
	}
	var out bytes.Buffer
	for _, l := range lines {
		out.Write(trimWSP(l, how))
		out.WriteString("\r\n")
	}
	return out.Bytes()
}

// trimWSP is the relaxed body rule for one line: runs of WSP become one
// SP, WSP at the end goes; simple keeps the line.
func trimWSP(l []byte, how string) []byte {
	if how != "relaxed" {
		return l
	}
	out := make([]byte, 0, len(l))
	space := false
	for _, c := range l {
		if c == ' ' || c == '\t' {
			space = true
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, c)
	}
	return out
}

// tagList parses a tag=value list (RFC 6376 §3.2); values keep inner
// spaces, FWS around them is dropped.
func tagList(v string) map[string]string {
	t := map[string]string{}
	for part := range strings.SplitSeq(v, ";") {
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		k = stripFWS(k)
		if _, dup := t[k]; !dup {
			t[k] = strings.TrimSpace(unfold(val))
		}
	}
	return t
}

func unfold(s string) string {
	return strings.NewReplacer("\r\n", "", "\n", "", "\r", "").Replace(s)
}

// stripFWS drops all white space (base64 values and tag names).
func stripFWS(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
}
