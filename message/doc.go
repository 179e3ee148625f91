// Package message is the message model: what envelopd makes of one raw
// RFC 5322 message, whichever way it travels. Analyze runs the stateless
// stages over the raw bytes — DKIM verification (RFC 6376, package dkim),
// the sender verdict (SPF, DMARC, ARC: package senderauth), the Envelopay
// parse (envelopay-v0.2.0, package parse) and the tunnelled-protocol
// validators (package protocols/tunnel); Incoming turns the Analysis into
// the record the store keeps (store.Incoming: addresses, refs, the proof
// fingerprint, the OFFER/ACCEPT assets, the result JSON); Sent is the
// stored copy of a message we send; View is the JSON an agent receives for
// a stored message (docs/json.md).
//
// It sits below the front ends that take mail in (mailin), send it
// (mailout) and serve it (api, mcp): they all describe a message the same
// way by using it, and none of them needs another to do so. It imports
// parse, protocols, dkim, senderauth, payments/proof and store, never a
// front end, and does no store I/O: the rules that need stored state run
// in store.
package message
