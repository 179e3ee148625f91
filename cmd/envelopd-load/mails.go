package main

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/defaults"
)

// Types are the nine Envelopay v0.2.0 message types ("Nine message
// types"), in the order a generated corpus cycles through them: each round
// of nine is one small conversation (ORDER→FULFILL, OFFER→ACCEPT threaded).
var Types = []string{"which", "methods", "pay", "order", "fulfill", "invoice", "offer", "accept", "oops"}

// Mail is one pre-generated message, ready for the wire.
type Mail struct {
	MessageID string // the Message-ID header value, angle brackets included
	From      string // envelope sender (MAIL FROM) and header From address
	To        string // envelope recipient
	Type      string // Envelopay type (lowercase)
	// Data is the message as sent after DATA: CRLF line ends, dot-stuffed,
	// ending in CRLF, without the terminating ".\r\n".
	Data []byte
}

// GenOptions configures Generate.
type GenOptions struct {
	Messages int
	Size     int     // approximate size of each mail in bytes (default 2048)
	Seed     uint64  // content seed: same seed, same types/amounts/attachments
	RSAShare float64 // share of mails signed with RSA-2048 (default 0.25); the rest Ed25519
	// AttachShare is the share of mails carrying a tunnelled JSON
	// attachment (default 0.2), alternately a VCP envelope and a PVP message.
	AttachShare float64
	// RunID makes Message-IDs, Envelopay ids and proofs unique across runs;
	// empty picks a random one.
	RunID string
	To    string // recipient (default inbox@envelopd.test)
	// Now dates the mails (Date header, tunnelled timestamps); zero: now.
	Now time.Time
	// Keys, when set, are the signing keys instead of fresh ones: Ed25519
	// and RSA keys, at least one of each.
	Keys []crypto.Signer
}

// Corpus is a generated set of mails and the DKIM keys that signed them.
type Corpus struct {
	RunID string
	Mails []Mail
	// TXT holds one static key file line per signing key (the format of
	// `envelopd serve --dkim-txt`, dkim.ParseStatic).
	TXT []string
}

type signerSet struct {
	ed, rsa []dkim.Signer
}

// Generate builds opts.Messages distinct, valid, DKIM-signed Envelopay
// mails, signing in parallel on all CPUs. Keys are opts.Keys or fresh
// ones (GenerateKeys); each key signs for its own sender domain.
func Generate(opts GenOptions) (*Corpus, error) {
	if opts.Messages < 0 {
		return nil, errors.New("messages must be ≥ 0")
	}
	defaults.Unset(&opts.Size, 2048)
	defaults.Unset(&opts.RSAShare, 0.25)
	defaults.Unset(&opts.AttachShare, 0.2)
	defaults.Unset(&opts.To, "inbox@envelopd.test")
	if opts.RunID == "" {
		var b [5]byte
		rand.Read(b[:])
		opts.RunID = hex.EncodeToString(b[:])
	}
	c := &Corpus{RunID: opts.RunID, Mails: make([]Mail, opts.Messages)}
	var ss signerSet
	keys := opts.Keys
	if keys == nil {
		var err error
		if keys, err = GenerateKeys(); err != nil {
			return nil, err
		}
	}
	for i, key := range keys {
		algo := "ed25519"
		if _, ok := key.Public().(*rsa.PublicKey); ok {
			algo = "rsa"
		}
		sel := map[string]string{"ed25519": "ed", "rsa": "rsa"}[algo] + opts.RunID
		s := dkim.Signer{Domain: fmt.Sprintf("agents%d.load.test", i), Selector: sel, Key: key}
		txt, err := dkim.TXTRecord(s.Domain, s.Selector, key.Public())
		if err != nil {
			return nil, err
		}
		c.TXT = append(c.TXT, txt)
		if algo == "rsa" {
			ss.rsa = append(ss.rsa, s)
		} else {
			ss.ed = append(ss.ed, s)
		}
	}
	// Each signer's DKIM-Signature field length, so padding can aim at Size.
	overhead := map[string]int{} // by selector
	for _, s := range append(append([]dkim.Signer{}, ss.ed...), ss.rsa...) {
		probe := []byte("From: a@b.test\r\nTo: c@d.test\r\nSubject: WHICH\r\nDate: x\r\nMessage-ID: <x@y>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\nx\r\n")
		signed, err := dkim.Sign(probe, s)
		if err != nil {
			return nil, err
		}
		overhead[s.Selector+s.Domain] = len(signed) - len(probe)
	}
	if len(ss.ed) == 0 || len(ss.rsa) == 0 {
		return nil, errors.New("need at least one Ed25519 and one RSA key")
	}
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < opts.Messages; i += workers {
				m, err := buildMail(i, &opts, &ss, overhead, now)
				if err != nil {
					errs[w] = err
					return
				}
				c.Mails[i] = m
			}
		}()
	}
	wg.Wait()
	return c, errors.Join(errs...)
}

// GenerateKeys makes a run's signing keys: two Ed25519 and two RSA-2048
// (each its own sender domain).
func GenerateKeys() ([]crypto.Signer, error) {
	var keys []crypto.Signer
	for _, algo := range []string{"ed25519", "ed25519", "rsa", "rsa"} {
		k, err := dkim.GenerateKey(algo)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// buildMail builds mail i. Its content depends only on (Seed, RunID, i).
func buildMail(i int, o *GenOptions, ss *signerSet, overhead map[string]int, now time.Time) (Mail, error) {
	rng := mrand.New(mrand.NewPCG(o.Seed, uint64(i)))
	var s dkim.Signer
	if rng.Float64() < o.RSAShare {
		s = ss.rsa[rng.IntN(len(ss.rsa))]
	} else {
		s = ss.ed[rng.IntN(len(ss.ed))]
	}
	typ := Types[i%len(Types)]
	round := i / len(Types)
	g := &gen{run: o.RunID, round: round, i: i, rng: rng, domain: s.Domain}
	from := fmt.Sprintf("agent%d@%s", round%50, s.Domain)
	msgID := fmt.Sprintf("<%s.%d@%s>", o.RunID, i, s.Domain)
	note, body := g.body(typ)
	var attach []byte
	var attachName string
	switch {
	case i == pvpCreateMail:
		attach, attachName = g.pvpCreate(now), "pvp-message.json"
	case rng.Float64() < o.AttachShare:
		if i%2 == 0 || i < pvpFirstPrompt {
			attach, attachName = g.vcp(now), "vcp-envelope.json"
		} else {
			attach, attachName = g.pvp(now), "pvp-message.json"
		}
	}

	var h bytes.Buffer
	fmt.Fprintf(&h, "From: Load Agent %d <%s>\r\n", round%50, from)
	fmt.Fprintf(&h, "To: %s\r\n", o.To)
	fmt.Fprintf(&h, "Subject: %s | %s\r\n", strings.ToUpper(typ), note)
	fmt.Fprintf(&h, "Date: %s\r\n", now.Add(time.Duration(i)*time.Millisecond).UTC().Format(time.RFC1123Z))
	fmt.Fprintf(&h, "Message-ID: %s\r\n", msgID)
	// ORDER↔FULFILL and OFFER↔ACCEPT thread (Envelopay "Threading").
	if ref := g.threadParent(typ); ref >= 0 {
		parent := fmt.Sprintf("<%s.%d@%s>", o.RunID, ref, parentDomain(ref, o, ss))
		fmt.Fprintf(&h, "In-Reply-To: %s\r\nReferences: %s\r\n", parent, parent)
	}
	fmt.Fprintf(&h, "MIME-Version: 1.0\r\nX-Envelopay-Type: %s\r\n", typ)

	text := func(pad int) []byte {
		var t bytes.Buffer
		// The reference implementation's shape: "TYPE | note" as the first
		// body line, pretty-printed JSON after it (implementation notes).
		fmt.Fprintf(&t, "%s | %s\r\n\r\n", strings.ToUpper(typ), note)
		t.Write(body)
		t.WriteString("\r\n")
		if pad > 0 {
			t.WriteString("\r\n-- \r\n")
			t.Write(prose(rng, pad))
		}
		return t.Bytes()
	}
	assemble := func(pad int) []byte {
		var m bytes.Buffer
		m.Write(h.Bytes())
		if attach == nil {
			m.WriteString("Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
			m.Write(text(pad))
			return m.Bytes()
		}
		boundary := "=_load_" + o.RunID + "_" + fmt.Sprint(i)
		fmt.Fprintf(&m, "Content-Type: multipart/mixed; boundary=\"%s\"\r\n\r\n", boundary)
		fmt.Fprintf(&m, "--%s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n", boundary)
		m.Write(text(pad))
		fmt.Fprintf(&m, "--%s\r\nContent-Type: application/json; name=\"%s\"\r\nContent-Disposition: attachment; filename=\"%s\"\r\nContent-Transfer-Encoding: 8bit\r\n\r\n", boundary, attachName, attachName)
		m.Write(attach)
		fmt.Fprintf(&m, "\r\n--%s--\r\n", boundary)
		return m.Bytes()
	}
	raw := assemble(0)
	if pad := o.Size - len(raw) - overhead[s.Selector+s.Domain]; pad > 8 {
		raw = assemble(pad)
	}
	signed, err := dkim.Sign(raw, s)
	if err != nil {
		return Mail{}, fmt.Errorf("mail %d: %w", i, err)
	}
	return Mail{MessageID: msgID, From: from, To: o.To, Type: typ, Data: dotStuff(signed)}, nil
}

// parentDomain is the signing domain mail ref gets (its first random draw).
func parentDomain(ref int, o *GenOptions, ss *signerSet) string {
	rng := mrand.New(mrand.NewPCG(o.Seed, uint64(ref)))
	if rng.Float64() < o.RSAShare {
		return ss.rsa[rng.IntN(len(ss.rsa))].Domain
	}
	return ss.ed[rng.IntN(len(ss.ed))].Domain
}

// gen builds the JSON parts of mail i of round round.
type gen struct {
	run    string
	round  int
	i      int
	rng    *mrand.Rand
	domain string
}

func (g *gen) id(prefix string) string { return fmt.Sprintf("%s_%s_%d", prefix, g.run, g.round) }

// proof is a unique, tx-hash-like proof string for this mail.
func (g *gen) proof() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", g.run, g.i)))
	return "0x" + hex.EncodeToString(sum[:])
}

func (g *gen) amount() string { return fmt.Sprint(1_000_000 + g.rng.IntN(99_000_000)) }

// wantAmount is the amount the round's OFFER wants and its ACCEPT pays.
func (g *gen) wantAmount() string { return fmt.Sprint(30_000_000 + g.round) }

// threadParent is the index of the mail typ replies to, or -1.
func (g *gen) threadParent(typ string) int {
	switch typ {
	case "fulfill": // replies to the round's ORDER
		return g.i - 1
	case "accept": // replies to the round's OFFER
		return g.i - 1
	}
	return -1
}

// body returns the subject note and the pretty-printed JSON object of a
// valid message of type typ (Envelopay v0.2.0, "How to send each one").
func (g *gen) body(typ string) (string, []byte) {
	type obj = map[string]any
	wallet := "6dL6n77jJFWq4bu3cQp57H8rMUPEXu7uYN1XApPx" + fmt.Sprintf("%04d", g.round%10000)
	var note string
	var o obj
	switch typ {
	case "which":
		note = fmt.Sprintf("Pricing for review job %d", g.round)
		o = obj{"id": g.id("wch"), "task": obj{"description": fmt.Sprintf("Review PR #%d", g.round)}}
	case "methods":
		note = "$0.50 USDC, Solana preferred"
		o = obj{"id": g.id("mth"), "which_ref": g.id("wch"), "accepts_natural_language": false,
			"rails": []obj{
				{"chain": "solana", "token": "SOL", "wallet": wallet, "price": "500000000"},
				{"chain": "base", "token": "USDC", "wallet": "0x1a2b" + fmt.Sprintf("%036x", g.round), "price": "500000"},
			}}
	case "pay":
		note = fmt.Sprintf("Payment %d", g.round)
		o = obj{"id": g.id("pay"), "amount": g.amount(), "token": "USDC", "chain": "base",
			"proof": obj{"tx": g.proof()}, "invoice_ref": g.id("inv")}
	case "order":
		note = fmt.Sprintf("Review PR #%d, focus on auth", g.round)
		o = obj{"id": g.id("ord"), "task": obj{"description": fmt.Sprintf("Review PR #%d", g.round),
			"repo": "github.com/alice/widget", "scope": "security"}}
		if g.round%2 == 0 { // prepaid
			o["amount"], o["token"], o["chain"], o["proof"] = g.amount(), "USDC", "base", obj{"tx": g.proof()}
		}
	case "fulfill":
		note = "Approved with 2 comments"
		o = obj{"id": g.id("ful"), "order_ref": g.id("ord"), "result": obj{"summary": "Approved with 2 comments",
			"findings": []obj{{"file": "handler.go", "line": 47, "severity": "medium", "finding": "Session token not validated before use"}}}}
	case "invoice":
		note = "Auth hardening beyond original scope"
		o = obj{"id": g.id("inv"), "order_ref": g.id("ord"), "amount": g.amount(), "token": "SOL", "chain": "solana",
			"wallet": wallet, "due": "2026-12-15"}
	case "offer":
		note = "1 SOL for 30 USDC"
		o = obj{"id": g.id("ofr"),
			"give": obj{"amount": "1000000000", "token": "SOL", "chain": "solana", "to": wallet, "proof": obj{"tx": g.proof()}},
			"want": obj{"amount": g.wantAmount(), "token": "USDC", "chain": "base"}, "wallet": "0x1a2b" + fmt.Sprintf("%036x", g.round)}
	case "accept":
		note = "30 USDC sent"
		o = obj{"id": g.id("acc"), "offer_ref": g.id("ofr"), "amount": g.wantAmount(), "token": "USDC", "chain": "base",
			"proof": obj{"tx": g.proof()}}
	case "oops":
		note = "Payment not found on-chain"
		o = obj{"id": g.id("oops"), "ref": g.id("pay"), "error": obj{"code": "tx_not_found", "tx": "0x3a7f" + fmt.Sprintf("%x", g.round)}}
	}
	o["v"], o["type"], o["note"] = "0.2.0", typ, note
	b, _ := json.MarshalIndent(o, "", "  ")
	return note, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

// vcp is a valid VCP envelope ("The envelope") with a unique msg_id and
// idempotency key, money in integer minor units.
func (g *gen) vcp(now time.Time) []byte {
	o := map[string]any{
		"protocol": "vcp", "version": "1.0",
		"msg_id":          fmt.Sprintf("msg_%s_%d", g.run, g.i),
		"ts":              now.UTC().Format(time.RFC3339),
		"from":            "buyer:agent" + fmt.Sprint(g.round%50),
		"to":              "seller:catalog",
		"session_id":      "sess_" + g.run,
		"in_reply_to":     nil,
		"idempotency_key": fmt.Sprintf("idem_%s_%d", g.run, g.i),
		"signature":       nil,
		"action": map[string]any{"kind": "commerce.order", "payload": map[string]any{
			"sku": fmt.Sprintf("sku-%d", g.rng.IntN(1000)), "quantity": 1 + g.rng.IntN(3), "unit_price": 1299}},
	}
	b, _ := json.MarshalIndent(o, "", "  ")
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

// The run's PVP session: mail pvpCreateMail creates it (its sender
// administers it, PVP v1 §6.1, §7.2), and the PVP attachments of the mails
// from pvpFirstPrompt on submit prompts in it. The gap keeps a prompt from
// reaching envelopd before the session exists when the mails are sent in
// order over up to that many concurrent sessions (earlier mails carry VCP
// envelopes instead); a prompt stored first would be quarantined
// (unauthorized).
const (
	pvpCreateMail  = 1
	pvpFirstPrompt = 64
)

// pvpCreate is the session.create of the run's PVP session.
func (g *gen) pvpCreate(now time.Time) []byte {
	o := map[string]any{
		"v": 1, "id": fmt.Sprintf("01LOAD%s%010d", strings.ToUpper(g.run), g.i),
		"ts":      now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"session": "ses_" + g.run, "sender": "alice_01", "type": "session.create",
		"payload": map[string]any{"name": "Load run " + g.run, "config": map[string]any{
			"require_approval_for": []string{"shell_execute"},
			"default_gate_quorum":  map[string]any{"type": "any", "count": 1},
			"allow_forks":          true, "max_participants": 5, "ordering_mode": "causal",
			"on_participant_timeout": "skip", "heartbeat_interval_seconds": 30,
			"idle_timeout_seconds": 120, "away_timeout_seconds": 300,
		}},
	}
	// Compact, so that this mail too stays near the requested size.
	b, _ := json.Marshal(o)
	return append(b, '\r', '\n')
}

// pvp is a valid PVP prompt.submit message (PVP v1, Appendix A) in the
// run's session, sent by its creator.
func (g *gen) pvp(now time.Time) []byte {
	o := map[string]any{
		"v": 1, "id": fmt.Sprintf("01LOAD%s%010d", strings.ToUpper(g.run), g.i),
		"ts":      now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"session": "ses_" + g.run, "sender": "alice_01", "type": "prompt.submit",
		"payload": map[string]any{"content": fmt.Sprintf("Implement JWT middleware, step %d", g.i),
			"target_agent": "claude_01", "contributors": []string{"alice_01"}, "context_keys": []string{"requirements"}},
	}
	b, _ := json.MarshalIndent(o, "", "  ")
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

var words = strings.Fields(`the agent reviewed order payment proof chain token wallet invoice
settlement receipt delivered thread message envelope queue signature verified budget scope
security review handler session middleware deadline estimate summary finding comment approve`)

// prose is about n bytes of signature-block text in lines under 76 bytes.
func prose(rng *mrand.Rand, n int) []byte {
	var b bytes.Buffer
	line := 0
	for b.Len() < n {
		w := words[rng.IntN(len(words))]
		if line+len(w)+1 > 72 {
			b.WriteString("\r\n")
			line = 0
		} else if line > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// dotStuff doubles a leading "." on every line (RFC 5321 section 4.5.2).
func dotStuff(msg []byte) []byte {
	if !bytes.Contains(msg, []byte("\n.")) && !bytes.HasPrefix(msg, []byte(".")) {
		return msg
	}
	var b bytes.Buffer
	b.Grow(len(msg) + 16)
	start := true
	for _, c := range msg {
		if start && c == '.' {
			b.WriteByte('.')
		}
		b.WriteByte(c)
		start = c == '\n'
	}
	return b.Bytes()
}
