// Package mailin takes mail in: the SMTP server backend (go-smtp), the IMAP
// poller (go-imap/v2), and the ingest pipeline both feed.
//
// The pipeline is the one place a received message is processed, whatever
// the transport: raw bytes → the message model's analysis (package message:
// DKIM verify over the raw bytes as received, Envelopay parse,
// tunnelled-protocol validation, the stored record) → one store
// transaction that makes every stateful decision (package store) → only then
// the transport's acknowledgement (SMTP 250, IMAP \Seen). Validation failures are never
// transport errors: the message is stored as quarantined with its errors.
// A courtesy OOPS (Envelopay v0.2.0, "OOPS": "No message requires a
// response. Silence is always valid. OOPS is a courtesy.") is queued in the
// same transaction for the codes listed in OOPSCodes, never to automated
// mail (RFC 3834 §2: Auto-Submitted; list and bulk mail; reports; OOPS).
package mailin
