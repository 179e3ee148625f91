package envelopay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/envelopd/envelopd/protocols"
)

// Validate checks the JSON body of a message whose subject names type typ
// (lower case). body is the JSON object as found in the mail, or nil when
// the mail has no JSON. It returns errors (the message is invalid) and
// warnings (worth reporting, not invalidating).
//
// The rules ("Protocol" and the field tables of "How to send each one"):
//   - With JSON present: it must be one object (invalid_json otherwise),
//     with "v" and "type" strings (missing_field / invalid_field); a "type"
//     other than typ is a type_mismatch warning — the subject wins.
//   - Without JSON: WHICH is valid bare, METHODS is valid natural-language
//     mode; every other type misses its required fields.
//   - Required fields per type as in the tables; required strings must be
//     non-empty; amounts and prices are strings of decimal digits; ORDER
//     with amount needs token, chain and proof; OFFER give needs amount,
//     token, chain, to, proof and want amount, token, chain; a missing
//     wallet (INVOICE, OFFER, a METHODS rail) is missing_wallet.
//   - Known optional fields are type-checked when present; unknown fields
//     are ignored.
func Validate(typ string, body []byte) (errs, warns protocols.Problems) {
	if body == nil {
		return ValidateFields(typ, nil)
	}
	f, err := DecodeObject(body)
	if err != nil {
		var p protocols.Problem
		errors.As(err, &p)
		return protocols.Problems{p}, nil
	}
	return ValidateFields(typ, f)
}

// ValidateFields is Validate on an already decoded object (DecodeObject);
// a nil map means the mail has no JSON.
func ValidateFields(typ string, f map[string]json.RawMessage) (errs, warns protocols.Problems) {
	c := checker{f: f, typ: typ}
	if !IsType(typ) {
		c.err(protocols.CodeUnknownType, "type", "unknown Envelopay type %q", typ)
		return c.errs, c.warns
	}
	if f != nil {
		c.str("v", true)
		if raw, ok := c.str("type", true); ok && !quoted(raw, typ) {
			if t, _ := String(raw); t != typ {
				c.warns = append(c.warns, protocols.New(protocols.CodeTypeMismatch, "type",
					"the body says type %q but the subject says %q; the subject wins", t, typ))
			}
		}
	}
	switch typ {
	case "which": // WHICH table: id, note, task, all optional.
		c.str("id", false)
		c.str("note", false)
		c.task("task", false)
	case "methods": // METHODS table.
		c.rails()
		c.boolean("accepts_natural_language")
		c.str("id", false)
		c.str("which_ref", false)
		c.str("note", false)
	case "pay": // PAY table.
		c.str("id", true)
		c.price(true)
		c.proof("proof", true)
		c.str("invoice_ref", false)
		c.str("note", false)
	case "order": // ORDER table: token, chain, proof "Required when amount is present".
		c.str("id", true)
		c.task("task", true)
		prepaid := c.price(false)
		c.proof("proof", prepaid)
		c.str("note", false)
	case "fulfill": // FULFILL table.
		c.str("id", true)
		c.str("order_ref", true)
		c.present("result", true)
		c.str("note", false)
	case "invoice": // INVOICE table.
		c.str("id", true)
		c.price(true)
		c.wallet("wallet")
		c.due()
		c.str("order_ref", false)
		c.str("note", false)
	case "offer": // OFFER table.
		c.str("id", true)
		if g, ok := c.object("give", true); ok {
			s := checker{f: g, prefix: "give."}
			s.price(true)
			s.str("to", true)
			s.proof("proof", true)
			c.errs = append(c.errs, s.errs...)
		}
		if w, ok := c.object("want", true); ok {
			s := checker{f: w, prefix: "want."}
			s.price(true)
			c.errs = append(c.errs, s.errs...)
		}
		c.wallet("wallet")
		c.str("note", false)
	case "accept": // ACCEPT table.
		c.str("id", true)
		c.str("offer_ref", true)
		c.price(true)
		c.proof("proof", true)
		c.str("note", false)
	case "oops": // OOPS table: note required; error "with code".
		c.str("id", false)
		c.str("note", true)
		if e, ok := c.object("error", false); ok {
			s := checker{f: e, prefix: "error."}
			s.str("code", true)
			c.errs = append(c.errs, s.errs...)
		}
		c.str("ref", false)
	}
	return c.errs, c.warns
}

// quoted reports whether raw is the JSON string for s, written plainly.
func quoted(raw json.RawMessage, s string) bool {
	return len(raw) == len(s)+2 && string(raw[1:len(raw)-1]) == s
}

// checker collects problems for one JSON object; prefix is its path
// ("give.").
type checker struct {
	f           map[string]json.RawMessage
	typ, prefix string
	errs, warns protocols.Problems
}

func (c *checker) err(code protocols.Code, field, format string, args ...any) {
	c.errs.Add(code, c.prefix+field, format, args...)
}

// get returns a member; JSON null counts as absent.
func (c *checker) get(name string) (json.RawMessage, bool) {
	v, ok := c.f[name]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (c *checker) missing(name string) {
	c.err(protocols.CodeMissingField, name, "%q is required", c.prefix+name)
}

// need returns a member (get), noting it missing when it is absent but
// required.
func (c *checker) need(name string, required bool) (json.RawMessage, bool) {
	v, ok := c.get(name)
	if !ok && required {
		c.missing(name)
	}
	return v, ok
}

// present checks a required member of any JSON type.
func (c *checker) present(name string, required bool) bool {
	_, ok := c.need(name, required)
	return ok
}

// price checks the amount, token and chain of a payment or price: the
// amount as required says, token and chain whenever it is required or
// present. It reports whether the amount is present.
func (c *checker) price(required bool) bool {
	present := c.amount("amount", required)
	c.str("token", required || present)
	c.str("chain", required || present)
	return present
}

// str checks a string member; required strings must be non-empty. It
// returns the raw JSON string (quotes included) so that callers decode it
// only when they need the value.
func (c *checker) str(name string, required bool) (json.RawMessage, bool) {
	v, ok := c.need(name, required)
	if !ok {
		return nil, false
	}
	switch {
	case v[0] != '"':
		c.err(protocols.CodeInvalidField, name, "%q must be a string, got %s", c.prefix+name, clip(v))
		return nil, false
	case len(v) == 2 && required:
		c.err(protocols.CodeInvalidField, name, "%q must not be empty", c.prefix+name)
		return nil, false
	}
	return v, true
}

// amount checks an amount or price: a string of decimal digits in the
// smallest unit ("30000000"). It reports whether the member is present.
func (c *checker) amount(name string, required bool) bool {
	v, ok := c.need(name, required)
	if !ok {
		return false
	}
	if !digits(v) {
		c.err(protocols.CodeInvalidField, name,
			"%q must be a string of decimal digits in the smallest unit (e.g. \"30000000\"), got %s%s", c.prefix+name, clip(v), amountHint(v))
	}
	return true
}

// amountHint says what to change for the common mistakes: money as a JSON
// number (a float loses precision) or with a decimal point (amounts are in
// the token's smallest unit: USDC has 6 decimals, so 30.5 USDC is
// "30500000").
func amountHint(v json.RawMessage) string {
	s := string(v)
	number := len(s) > 0 && (s[0] == '-' || s[0] >= '0' && s[0] <= '9')
	if !number && (len(s) < 2 || s[0] != '"') {
		return ""
	}
	if !number {
		s = s[1 : len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e15 {
		return ""
	}
	switch {
	case number && !strings.ContainsAny(s, ".eE"):
		return fmt.Sprintf("; quote it: \"%s\" (a JSON number is not an amount)", s)
	case number:
		return fmt.Sprintf("; write a string in the token's smallest unit, never a float (USDC has 6 decimals: %s is \"%s\")", s, smallest(f, 6))
	case strings.Contains(s, "."):
		return fmt.Sprintf("; drop the decimal point and give the token's smallest unit (USDC has 6 decimals: %q is \"%s\")", s, smallest(f, 6))
	}
	return ""
}

// smallest writes f in units of 10^-decimals, rounded.
func smallest(f float64, decimals int) string {
	return strconv.FormatFloat(math.Round(f*math.Pow10(decimals)), 'f', 0, 64)
}

func digits(v json.RawMessage) bool {
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for _, d := range v[1 : len(v)-1] {
		if d < '0' || d > '9' {
			return false
		}
	}
	return true
}

// proof checks a proof: rail-defined and opaque ("Settlement model"), so any
// JSON value but null, an empty string or an empty object.
func (c *checker) proof(name string, required bool) {
	v, ok := c.need(name, required)
	if !ok {
		return
	}
	if isEmpty(v) {
		c.err(protocols.CodeInvalidField, name, "%q must not be empty", c.prefix+name)
	}
}

// isEmpty reports whether v is "" or {} (with any inner white space).
func isEmpty(v json.RawMessage) bool {
	if string(v) == `""` {
		return true
	}
	return v[0] == '{' && len(bytes.TrimSpace(v[1:len(v)-1])) == 0
}

// task checks a task: an object, or a non-empty string (natural language,
// "Natural language mode").
func (c *checker) task(name string, required bool) {
	v, ok := c.need(name, required)
	if !ok {
		return
	}
	if s, isStr := String(v); (isStr && s != "") || v[0] == '{' {
		return
	}
	c.err(protocols.CodeInvalidField, name, "%q must be an object or a non-empty string, got %s", c.prefix+name, clip(v))
}

func (c *checker) boolean(name string) {
	if v, ok := c.get(name); ok && string(v) != "true" && string(v) != "false" {
		c.err(protocols.CodeInvalidField, name, "%q must be true or false, got %s", c.prefix+name, clip(v))
	}
}

// object returns an object member, decoded.
func (c *checker) object(name string, required bool) (map[string]json.RawMessage, bool) {
	v, ok := c.need(name, required)
	if !ok {
		return nil, false
	}
	if v[0] != '{' {
		c.err(protocols.CodeInvalidField, name, "%q must be an object, got %s", c.prefix+name, clip(v))
		return nil, false
	}
	m, _ := DecodeObject(v) // v is part of a valid object
	return m, true
}

// wallet checks a required wallet: missing is the spec's missing_wallet.
func (c *checker) wallet(name string) {
	if _, ok := c.get(name); !ok {
		c.err(protocols.CodeMissingWallet, name, "%q is required: where to send payment", c.prefix+name)
		return
	}
	c.str(name, true)
}

// due is "ISO 8601 date (a signal, not enforced)": a string; a value that
// is not a date is only a warning.
func (c *checker) due() {
	raw, ok := c.str("due", false)
	if !ok {
		return
	}
	s, _ := String(raw)
	for _, layout := range []string{"2006-01-02", time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if _, err := time.Parse(layout, s); err == nil {
			return
		}
	}
	c.warns = append(c.warns, protocols.New(protocols.CodeInvalidField, "due", "\"due\" is not an ISO 8601 date: %q", s))
}

// rails checks METHODS rails: at least one, each with chain, token, wallet
// and an indicative price in the smallest unit.
func (c *checker) rails() {
	v, ok := c.get("rails")
	if c.f == nil {
		return // natural-language METHODS: no JSON, nothing required
	}
	if !ok {
		c.missing("rails")
		return
	}
	var rails []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &rails) != nil {
		c.err(protocols.CodeInvalidField, "rails", "\"rails\" must be an array of rail objects, got %s", clip(v))
		return
	}
	if len(rails) == 0 {
		c.err(protocols.CodeInvalidField, "rails", "\"rails\" must hold at least one accepted rail")
		return
	}
	for i, r := range rails {
		p := fmt.Sprintf("rails[%d]", i)
		if r[0] != '{' {
			c.err(protocols.CodeInvalidField, p, "%q must be an object, got %s", p, clip(r))
			continue
		}
		m, _ := DecodeObject(r)
		s := checker{f: m, prefix: p + "."}
		s.str("chain", true)
		s.str("token", true)
		s.wallet("wallet")
		s.amount("price", true)
		c.errs = append(c.errs, s.errs...)
	}
}

// clip shortens a JSON value for a message.
func clip(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}
