package parse

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// OOPSCodes are the errors envelopd answers with a courtesy OOPS
// (envelopay-v0.2.0 "OOPS is a courtesy"; issue: serve, "Courtesy OOPS").
// Other errors (invalid_json, invalid_field, …) get none.
var OOPSCodes = []protocols.Code{
	protocols.CodeUnknownType,
	protocols.CodeDKIMFailed,
	protocols.CodeDuplicateProof,
	protocols.CodeAmountMismatch,
	protocols.CodeMissingField,
}

// MaxOOPSNote bounds the note of a courtesy OOPS, in runes.
const MaxOOPSNote = 200

// maxOOPSRef bounds the ref echoed back; a longer id is not echoed.
const maxOOPSRef = 128

// OOPSOwed returns the problem a courtesy OOPS answers for a message of
// type typ with the errors errs: the first whose code is in OOPSCodes.
// None for an OOPS (never answer an OOPS with one), for mail that is not
// Envelopay unless its type is unknown, or when the From header is in
// doubt (no one to answer safely).
func OOPSOwed(typ string, errs protocols.Problems) (protocols.Problem, bool) {
	return protocols.OOPSOwed(typ, errs, OOPSCodes)
}

// OOPSBody is the Envelopay JSON of the courtesy OOPS answering p for the
// message whose Envelopay id is ref: the one composer behind both the
// `oops` preview of a parse result and the OOPS serve sends (package
// mailout composes the mail around it), so the two never differ. Nothing
// the peer wrote reaches it unsanitised: the note is OOPSNote,
// the field name is kept only when short and printable, and ref only when
// short and printable.
func OOPSBody(p protocols.Problem, ref string) json.RawMessage {
	var extra map[string]any
	if f := p.Field; f != "" && len(f) <= 64 && printable(f) {
		extra = map[string]any{"field": f}
	}
	if len(ref) > maxOOPSRef || !printable(ref) {
		ref = ""
	}
	return envelopay.OOPSFor(p.Code, ref, OOPSNote(p), extra)
}

// OOPSNote is the human sentence of a courtesy OOPS for p: for
// dkim_failed a fixed text (a failing signature's tags — d=, s=, the
// verifier's error — are the sender's own text and are never echoed); for
// the others p's message with control and format characters replaced by
// spaces, runs of blanks collapsed, at most MaxOOPSNote runes.
func OOPSNote(p protocols.Problem) string {
	if p.Code == protocols.CodeDKIMFailed {
		return "A DKIM signature of your message did not verify, so it was not processed; send it again with a valid signature."
	}
	s := clean(p.Message)
	if s == "" {
		s = clean(string(p.Code))
	}
	if s == "" {
		s = "error"
	}
	return s
}

// clean replaces control and format characters by spaces, collapses runs
// of blanks and bounds s to MaxOOPSNote runes.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > MaxOOPSNote {
		rs := []rune(s)
		s = strings.TrimSpace(string(rs[:MaxOOPSNote-1])) + "…"
	}
	return s
}

// printable reports whether s holds only printable ASCII without blanks.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
