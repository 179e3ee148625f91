// Package parse turns one raw RFC 5322 message into a typed Envelopay
// result (Result, the JSON contract of `envelopd parse`). It follows
// Envelopay v0.2.0 (shared/specs/envelopay-v0.2.0.txt) and the notes in
// shared/specs/implementation-notes.md; the protocol rules themselves live
// in package protocols/envelopay, this package finds their inputs in mail.
//
// What it does, and where the rule comes from:
//
//   - Header fields (RFC 5322 §3.6): From, To, Cc as bare addr-specs with the
//     domain lower-cased; more than one From field is invalid_field "from";
//     Date as RFC 3339; Message-ID, In-Reply-To and References normalised by
//     NormalizeMessageID / MessageIDList (§3.6.4: brackets and comments
//     dropped, domain part lower-cased); the Subject's RFC 2047
//     encoded-words decoded; X-Envelopay-Type kept as a hint only (spec
//     "Protocol": optional, for routing) and a type_mismatch warning when
//     it disagrees with the subject.
//   - Subject: envelopay.ParseSubject (spec "Subject parsing"), strict by
//     default, Options.Lenient for the reference implementation.
//   - MIME (RFC 2045, RFC 2046): the tree is flattened into leaves; the body
//     text is the first non-blank inline text/plain part, else the first
//     text/html part turned into text (tags dropped, entities decoded,
//     <blockquote> dropped); every other leaf is an Attachment, JSON parts
//     included, transfer-decoded. Transfer encodings (quoted-printable with
//     soft breaks, base64) and format=flowed (RFC 3676) are undone and
//     charsets converted with go-message's charset package.
//   - Body (spec "Protocol": extracting the JSON from signatures, HTML and
//     quoted text is the receiver's job; implementation-notes.md: a
//     balanced object anywhere in the text): quoted material and the
//     signature are cut (stripQuoted), then FindJSON takes the first
//     JSON-like candidate; an array or unparseable JSON is invalid_json.
//   - Validation: envelopay.ValidateFields, the spec's per-type tables. A
//     METHODS without parseable JSON is natural-language mode ("Natural
//     language mode"); a bare WHICH is valid.
//   - OOPS: for an unknown type (spec "OOPS": reply unknown_type with the
//     supported types) and for an invalid message of a known type, the
//     Result carries the OOPS body a receiver would send back.
//
// Robustness: the parser never fails. go-message's own reader aborts on
// malformed headers, bad quoted-printable or a truncated multipart, so
// the header and multipart splitting here are a small zero-copy reader that is lenient
// by construction: a truncated multipart, an unknown charset, bad
// quoted-printable or base64 still give a result, with errors saying what
// was wrong (codes invalid_field with field "mime", "content-type",
// "content-transfer-encoding" or "header"). Decoding problems in
// attachments are warnings (field "attachments[N]").
package parse
