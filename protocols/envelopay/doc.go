// Package envelopay models the Envelopay protocol v0.2.0
// (shared/specs/envelopay-v0.2.0.txt, with the reference-implementation notes
// in shared/specs/implementation-notes.md, section "Envelopay"): the nine
// message types, the subject grammar, the per-type field tables, the error
// codes and the OOPS reply. It is pure: it knows nothing of email; package
// parse finds the subject and the JSON object in a mail and calls it.
//
// Rules and where they come from (section names are the spec's headings):
//
//   - Types, Keywords: "Nine message types".
//   - ParseSubject: "Protocol" / "Subject parsing" — the first token must be
//     one of the nine all-caps keywords, `TYPE` or `TYPE | note`, no
//     stripping of Re:/Fwd:; a subject of the shape ^[A-Z]+(\s*\|.*)?$ whose
//     keyword is not one of the nine is unknown_type ("OOPS", last
//     paragraph). The lenient mode (strip repeated Re:, never Fwd:; keyword
//     in any case) follows the reference implementation as described in
//     implementation-notes.md.
//   - Validate: "Protocol" — a JSON body must be one object with v and type,
//     unknown fields are ignored, the subject wins over the body's type
//     (type_mismatch warning); "Natural language mode" — METHODS without JSON
//     is valid; "WHICH" — a bare WHICH is valid; the field tables under "How
//     to send each one" (WHICH … OOPS) give the required fields; amounts and
//     prices are strings of decimal digits in the smallest unit (PAY, METHODS
//     tables; implementation-notes.md); ORDER "token/chain/proof: Required
//     when amount is present"; OFFER give/want; a missing wallet is the
//     spec's missing_wallet code ("OOPS", error codes).
//   - OOPSFor: "OOPS" — note for a human, error object with a code for an
//     agent, optional ref; unknown_type carries the list of supported types.
//   - IDPrefix, NewID, RefFields: "Protocol" / "Identifiers" (ids are opaque;
//     the prefixes are the ones of the spec's examples).
package envelopay
