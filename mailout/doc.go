// Package mailout sends Envelopay mail: it composes a typed message into a
// correct RFC 5322 / MIME message (envelopay-v0.2.0 "Protocol": subject
// `TYPE | note`, one JSON object in a text/plain part), threads replies
// with In-Reply-To and References (spec "Threading", RFC 5322 section
// 3.6.4), DKIM-signs it (RFC 6376, via package dkim), submits it to the
// agent's smarthost (RFC 6409 / RFC 8314, via go-smtp), and delivers it
// from the durable outbound queue in the store with per-recipient state and
// exponential backoff (RFC 5321 section 4.5.4.1).
//
// The pieces:
//   - Draft, Compose: a message from typed fields; refused with the
//     protocols.Problem codes of package envelopay when invalid.
//   - ReplyDraft, ComposeOOPS: threaded replies with the typed ref filled.
//   - Sign: DKIM with the configured keys.
//   - Submitter: one smarthost; RcptResult and *SendError (temporary or
//     permanent) per recipient.
//   - Worker: the queue loop (ClaimDue, Submit, RecordDelivery).
package mailout
