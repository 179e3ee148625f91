package vacant

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/canonjson"
	"github.com/envelopd/envelopd/protocols/internal/jsondoc"
)

var (
	hex64RE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	hex128RE = regexp.MustCompile(`^[0-9a-f]{128}$`)
)

const (
	msgPath  = "params.message"
	metaPath = "params.message.metadata." + MetadataKey
)

// maxSelfEval bounds the selfEval object (the reference holds six scores).
const maxSelfEval = 32

// IsVacant reports whether a decoded JSON document looks like a Vacant
// envelope: a JSON-RPC object with params.message.metadata["urn:vacant:v1"].
// It is the detection rule of the tunnel package; Validate does the checks.
func IsVacant(doc map[string]any) bool {
	if _, ok := doc["jsonrpc"]; !ok {
		return false
	}
	params, _ := doc["params"].(map[string]any)
	msg, _ := params["message"].(map[string]any)
	meta, _ := msg["metadata"].(map[string]any)
	_, ok := meta[MetadataKey]
	return ok
}

// Validate checks one Vacant envelope document (see the package doc). A
// valid Report carries one Link for the store's per-pair chain.
func Validate(doc []byte) protocols.Report {
	r := protocols.Report{Protocol: Protocol, Errors: protocols.Problems{}, Summary: map[string]any{}}
	e, probs := Parse(doc)
	r.Errors = append(r.Errors, probs...)
	if e != nil {
		for k, v := range map[string]string{"from": e.From, "to": e.To} {
			if v != "" {
				r.Summary[k] = v
			}
		}
		if e.Seq != 0 {
			r.Summary["seq"] = e.Seq
		}
		if e.Payload.MessageID != nil {
			r.Summary["message_id"] = *e.Payload.MessageID
		}
	}
	r.Valid = len(r.Errors) == 0
	if r.Valid {
		signed, _ := SigningBytes(e) // cannot fail: Parse already built them
		r.Links = []protocols.Link{{Chain: Chain(e.From, e.To), Seq: e.Seq, Prev: e.Prev, Hash: Hash(signed)}}
	}
	return r
}

// Parse reads a wire envelope and checks it, signature included. It returns
// the envelope (nil when the document is not JSON) and every problem found.
func Parse(doc []byte) (*Envelope, protocols.Problems) {
	m, err := canonjson.ParseObject(doc)
	if err != nil {
		return nil, protocols.Problems{protocols.New(protocols.CodeInvalidJSON, "", "%v", err)}
	}
	p := &wireParser{}
	e := p.envelope(m)
	if p.complete {
		p.errs = append(p.errs, checkEnvelope(e)...)
		p.verify(e)
	}
	return e, p.errs
}

type wireParser struct {
	errs protocols.Problems
	// complete is true while every field the signing bytes need was read.
	complete bool
}

func (p *wireParser) add(code protocols.Code, field, format string, args ...any) {
	p.errs.Add(code, field, format, args...)
}

// bad records a problem with a field the signing bytes need.
func (p *wireParser) bad(code protocols.Code, field, format string, args ...any) {
	p.add(code, field, format, args...)
	p.complete = false
}

func (p *wireParser) object(parent map[string]any, key, path string) map[string]any {
	v, ok := parent[key]
	if !ok {
		p.bad(protocols.CodeMissingField, path, "%s is required", path)
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		p.bad(protocols.CodeInvalidField, path, "%s must be an object", path)
		return nil
	}
	return o
}

// str reads a required string; re, when set, is the shape it must have.
func (p *wireParser) str(parent map[string]any, key, path string, re *regexp.Regexp, rule string) string {
	v, ok := parent[key]
	if !ok {
		p.bad(protocols.CodeMissingField, path, "%s is required", path)
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.bad(protocols.CodeInvalidField, path, "%s must be a string", path)
		return ""
	}
	if re != nil && !re.MatchString(s) {
		p.bad(protocols.CodeInvalidField, path, "%s must be %s", path, rule)
		return ""
	}
	return s
}

// optStr reads a string-or-null field that may be absent.
func (p *wireParser) optStr(parent map[string]any, key, path string) *string {
	switch v := parent[key].(type) {
	case nil:
		return nil
	case string:
		return &v
	default:
		p.bad(protocols.CodeInvalidField, path, "%s must be a string or null", path)
		return nil
	}
}

func (p *wireParser) envelope(m map[string]any) *Envelope {
	p.complete = true
	e := &Envelope{}
	jsondoc.RPCVersion(&p.errs, m, "jsonrpc is required", "jsonrpc must be \"2.0\"")
	switch v, ok := m["method"]; {
	case !ok:
		p.add(protocols.CodeMissingField, "method", "method is required")
	case v != Method:
		p.add(protocols.CodeInvalidField, "method", "method must be %q (P6 §3.2)", Method)
	}
	e.RPCID = jsondoc.RPCID(&p.errs, m, "a message/send request needs an id")
	params := p.object(m, "params", "params")
	if params == nil {
		return e
	}
	msg := p.object(params, "message", msgPath)
	if msg == nil {
		return e
	}
	p.message(msg, e)
	md := p.object(msg, "metadata", msgPath+".metadata")
	if md == nil {
		return e
	}
	meta := p.object(md, MetadataKey, metaPath)
	if meta == nil {
		return e
	}
	hexRule := "64 lowercase hex digits"
	e.From = p.str(meta, "from_vacant_id", metaPath+".from_vacant_id", hex64RE, hexRule)
	e.To = p.str(meta, "to_vacant_id", metaPath+".to_vacant_id", hex64RE, hexRule)
	p.seq(meta, e)
	if ts := p.str(meta, "timestamp", metaPath+".timestamp", nil, ""); ts != "" {
		t, err := ParseTime(ts)
		if err != nil {
			p.bad(protocols.CodeInvalidField, metaPath+".timestamp", "%v", err)
		}
		e.Time = t
	}
	e.Prev = p.str(meta, "prev_envelope_hash", metaPath+".prev_envelope_hash", hex64RE, hexRule)
	if v, ok := meta["idempotency_key"]; ok {
		if s, isStr := v.(string); isStr {
			e.Idem = s
		} else {
			p.bad(protocols.CodeInvalidField, metaPath+".idempotency_key", "idempotency_key must be a string")
		}
	}
	e.Signature = p.str(meta, "caller_signature", metaPath+".caller_signature", hex128RE, "128 lowercase hex digits (64 bytes)")
	return e
}

func (p *wireParser) seq(meta map[string]any, e *Envelope) {
	path := metaPath + ".sequence_no"
	v, ok := meta["sequence_no"]
	if !ok {
		p.bad(protocols.CodeMissingField, path, "sequence_no is required")
		return
	}
	n, isNum := v.(json.Number)
	if !isNum || strings.ContainsAny(string(n), ".eE") {
		p.bad(protocols.CodeInvalidField, path, "sequence_no must be an integer")
		return
	}
	seq, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		p.bad(protocols.CodeInvalidField, path, "sequence_no %s is out of range", n)
		return
	}
	e.Seq = seq
}

func (p *wireParser) message(msg map[string]any, e *Envelope) {
	e.Payload.Role = p.str(msg, "role", msgPath+".role", nil, "")
	e.Payload.ContextID = p.optStr(msg, "contextId", msgPath+".contextId")
	e.Payload.MessageID = p.optStr(msg, "messageId", msgPath+".messageId")
	pv, ok := msg["parts"]
	if !ok {
		p.bad(protocols.CodeMissingField, msgPath+".parts", "parts is required")
	} else if parts, ok := pv.([]any); !ok {
		p.bad(protocols.CodeInvalidField, msgPath+".parts", "parts must be an array")
	} else {
		for i, x := range parts {
			e.Payload.Parts = append(e.Payload.Parts, p.part(x, msgPath+".parts["+strconv.Itoa(i)+"]"))
		}
	}
	switch se := msg["selfEval"].(type) {
	case nil:
	case map[string]any:
		if len(se) > maxSelfEval {
			p.bad(protocols.CodeInvalidField, msgPath+".selfEval", "selfEval has %d entries, at most %d", len(se), maxSelfEval)
			return
		}
		e.Payload.SelfEval = map[string]float64{}
		for k, v := range se {
			n, ok := v.(json.Number)
			f, err := strconv.ParseFloat(string(n), 64)
			if !ok || err != nil {
				p.bad(protocols.CodeInvalidField, msgPath+".selfEval."+k, "selfEval scores must be finite numbers")
				continue
			}
			e.Payload.SelfEval[k] = f
		}
	default:
		p.bad(protocols.CodeInvalidField, msgPath+".selfEval", "selfEval must be an object of numbers or null")
	}
}

func (p *wireParser) part(x any, path string) Part {
	o, ok := x.(map[string]any)
	if !ok {
		p.bad(protocols.CodeInvalidField, path, "a part must be an object")
		return Part{}
	}
	for k := range o {
		if k != "type" && k != "text" {
			p.bad(protocols.CodeInvalidField, path+"."+k, "a Vacant part has only type and text; %q would not be signed", k)
		}
	}
	t := p.str(o, "type", path+".type", nil, "")
	if t != "" && t != "text" {
		p.bad(protocols.CodeInvalidField, path+".type", "part type %q: only text parts exist (D009 §F)", t)
	}
	return Part{Type: t, Text: p.str(o, "text", path+".text", nil, "")}
}

// checkEnvelope holds the rules on a complete envelope, for Parse and Sign.
func checkEnvelope(e *Envelope) protocols.Problems {
	var ps protocols.Problems
	if !hex64RE.MatchString(e.From) {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, metaPath+".from_vacant_id", "from must be 64 lowercase hex digits"))
	}
	if !hex64RE.MatchString(e.To) {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, metaPath+".to_vacant_id", "to must be 64 lowercase hex digits"))
	}
	if !hex64RE.MatchString(e.Prev) {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, metaPath+".prev_envelope_hash", "prev must be 64 lowercase hex digits"))
	}
	if e.Seq < 1 {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, metaPath+".sequence_no", "sequence_no %d: a chain starts at 1", e.Seq))
	} else if e.Seq == 1 && e.Prev != ZeroHash {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, metaPath+".prev_envelope_hash", "the first envelope of a pair (sequence_no 1) has the zero prev hash"))
	}
	if e.Payload.Role == "" {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, msgPath+".role", "role must be a non-empty string"))
	}
	if e.Time.IsZero() {
		ps = append(ps, protocols.New(protocols.CodeInvalidField, metaPath+".timestamp", "timestamp is required"))
	}
	for i, pt := range e.Payload.Parts {
		if pt.Type != "text" {
			ps = append(ps, protocols.New(protocols.CodeInvalidField, msgPath+".parts["+strconv.Itoa(i)+"].type", "only text parts exist (D009 §F)"))
		}
	}
	return ps
}

func (p *wireParser) verify(e *Envelope) {
	signed, err := SigningBytes(e)
	if err != nil {
		p.add(protocols.CodeInvalidField, msgPath, "signing bytes: %v", err)
		return
	}
	pub, _ := hex.DecodeString(e.From)
	sig, _ := hex.DecodeString(e.Signature)
	if !ed25519.Verify(ed25519.PublicKey(pub), signed, sig) {
		p.add(protocols.CodeBadSignature, metaPath+".caller_signature", "the Ed25519 signature of from_vacant_id does not verify over the signing bytes")
	}
}
