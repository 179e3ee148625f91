package message

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/envelopd/envelopd/payments/proof"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
	"github.com/envelopd/envelopd/protocols/envelopay"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// Incoming turns an analysis into the store's input: addresses, ids, refs,
// the proof fingerprint and the OFFER/ACCEPT assets. a.Result must be as
// Analyze left it (its JSON is taken from Analyze).
func Incoming(a *Analysis, raw []byte, dir string) *store.Incoming {
	r := a.Result
	in := &store.Incoming{
		Direction:   dir,
		Raw:         raw,
		MessageID:   r.MessageID,
		InReplyTo:   r.InReplyTo,
		References:  r.References,
		Subject:     r.Subject,
		Type:        r.Type,
		EnvelopayID: r.ID,
		Errors:      r.Errors,
		Warnings:    r.Warnings,
		Claims:      a.Claims,
		Links:       a.Links,
		Checks:      a.Checks,
		Sets:        a.Sets,
	}
	if len(r.From) > 0 {
		in.Sender = strings.ToLower(r.From[0])
	}
	for _, l := range [][]string{r.To, r.Cc} {
		for _, addr := range l {
			in.Recipients = append(in.Recipients, strings.ToLower(addr))
		}
	}
	in.Status = store.StatusAccepted
	if len(r.Errors) > 0 {
		in.Status = store.StatusQuarantined
	}
	// MarshalJSON itself, not json.Marshal: that re-validates and
	// compacts the method's output, a second pass over the same bytes
	// (docs/performance.md).
	if a.resultJSON != nil {
		in.Result = a.resultJSON // Analyze's marshal, when it kept the result whole
	} else if b, err := r.MarshalJSON(); err == nil {
		in.Result = b
	}
	in.SenderVerdict = store.SenderVerdictAuthenticated // no verdict
	if a.Sender != nil {
		// MarshalJSON itself: json.Marshal would compact its output again.
		if b, err := a.Sender.MarshalJSON(); err == nil {
			var added bool
			in.Result, added = withKey(in.Result, senderauth.ResultKey, b)
			if added && a.Sender.AuthenticatedAs == "" {
				in.SenderVerdict = store.SenderVerdictUnauthenticated
			}
		}
	}
	if b, err := json.Marshal(a.DKIM); err == nil {
		in.DKIM = b
	}
	in.BodyFingerprint = BodyFingerprint(r.Body)
	f := r.Fields
	if f == nil {
		return in
	}
	for _, name := range envelopay.RefFields {
		if v := str(f[name]); v != "" {
			if in.Refs == nil {
				in.Refs = map[string]string{}
			}
			in.Refs[name] = v
		}
	}
	switch r.Type {
	case "pay", "order", "accept":
		setProof(in, str(f["chain"]), str(f["token"]), str(f["amount"]), f["proof"])
		if r.Type == "accept" {
			in.AcceptPaid = &store.Asset{Amount: str(f["amount"]), Token: str(f["token"]), Chain: str(f["chain"])}
		}
	case "offer":
		var give struct {
			Chain  string          `json:"chain"`
			Token  string          `json:"token"`
			Amount string          `json:"amount"`
			Proof  json.RawMessage `json:"proof"`
		}
		if json.Unmarshal(f["give"], &give) == nil {
			setProof(in, give.Chain, give.Token, give.Amount, give.Proof)
		}
		var want store.Asset
		if json.Unmarshal(f["want"], &want) == nil {
			in.OfferWant = &want
		}
	}
	return in
}

// withKey returns the JSON object obj with "key": val added at its end
// (obj must not have key already; Analyze's result never has "sender"),
// and whether it was added (obj is an object). It copies obj: Analyze's
// buffer may be shared.
func withKey(obj []byte, key string, val []byte) ([]byte, bool) {
	obj = bytes.TrimRight(obj, " \r\n\t")
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return obj, false
	}
	out := make([]byte, 0, len(obj)+len(key)+len(val)+4)
	out = append(out, obj[:len(obj)-1]...)
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	out = append(out, val...)
	return append(out, '}'), true
}

// Withheld is what is stored instead of a mail that must not be persisted:
// its header section and a line saying why the body was withheld. The
// parse result (errors, attachment summaries) is kept; the attachment
// contents are not.
func Withheld(raw []byte, why string) []byte {
	head := raw
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		head = raw[:i+2]
	} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		head = raw[:i+1]
	}
	var b bytes.Buffer
	skipping := false
	for _, line := range bytes.SplitAfter(head, []byte("\n")) {
		// The body is gone, so its MIME description (and the folded
		// lines of those fields) is dropped too.
		if len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			if !skipping {
				b.Write(line)
			}
			continue
		}
		skipping = bytes.HasPrefix(bytes.ToLower(line), []byte("content-"))
		if !skipping {
			b.Write(line)
		}
	}
	b.WriteString("X-Envelopd-Withheld: " + why + "\r\n\r\n")
	b.WriteString("[envelopd: the body of this message was not stored: " + why + "]\r\n")
	return b.Bytes()
}

// setProof gives in the identity of its payment proof (package
// payments/proof: the on-chain transaction it names, normalised per chain
// kind), so that one transaction however written is one proof (Envelopay
// v0.2.0, "Verification": "proof deduplication"). A proof naming no
// recognisable transaction, or a malformed one, adds the proof's warning.
func setProof(in *store.Incoming, chain, token, amount string, raw json.RawMessage) {
	id := proof.Identify(chain, raw)
	if id.Fingerprint == "" {
		return
	}
	in.ProofFingerprint = id.Fingerprint
	in.Proof = &store.ProofFacts{Chain: id.Chain, Tx: id.Tx, Token: token, Amount: amount}
	if id.Warning != "" {
		in.Warnings = append(in.Warnings[:len(in.Warnings):len(in.Warnings)], protocols.New(protocols.Code(id.Warning), "proof", "%s", id.Detail))
	}
}

// BodyFingerprint identifies a message's content for retry detection
// (store.Incoming.BodyFingerprint): the hex SHA-256 of its Envelopay JSON
// body in canonical form, so that the same body re-serialised (another
// client, another line wrapping) is still the same. No body → "".
func BodyFingerprint(body json.RawMessage) string {
	if len(body) == 0 {
		return ""
	}
	v, err := canonjson.Parse(body)
	if err != nil {
		return ""
	}
	c, err := canonjson.JS(v)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(c)
	return hex.EncodeToString(h[:])
}

// str is the JSON string raw, or "" when raw is not one. A string
// without escapes, quotes or control characters in valid UTF-8 is its
// own text, read without a decoder.
func str(raw json.RawMessage) string {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' {
		plain := true
		for _, c := range raw[1 : n-1] {
			if c < 0x20 || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
		if plain && utf8.Valid(raw[1:n-1]) {
			return string(raw[1 : n-1])
		}
	}
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Sent is the stored copy of a message we send (store.Outgoing.Copy): the
// same analysis as received mail, without DKIM verification or sender
// checks (we signed it), so a thread shows both directions alike.
// receivedAt is when it was queued.
func Sent(ctx context.Context, raw []byte, receivedAt time.Time) *store.Incoming {
	in := Incoming(Analyze(ctx, raw, AnalyzeOptions{}), raw, store.DirOut)
	in.ReceivedAt = receivedAt.UTC()
	return in
}
