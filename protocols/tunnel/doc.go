// Package tunnel recognises the agent protocols that ride in Envelopay mails
// as JSON parts and hands each to its validator:
// VCP (protocols/vcp), Vacant P6 (protocols/vacant), A2A (protocols/a2a),
// AICP (protocols/aicp) and PVP (protocols/pvp).
//
// A part is inspected when IsJSONPart says it is JSON: application/json,
// application/*+json, or a name ending in ".json". Detection is by content,
// first match wins:
//
//  1. "protocol": "vcp"                                   → vcp
//  2. "jsonrpc" and params.message.metadata["urn:vacant:v1"] → vacant
//  3. "jsonrpc" and a send method (message/send, SendMessage, and their
//     streaming forms message/stream, SendStreamingMessage)  → a2a
//  4. "v", "nonce" and a "from" or "to" handle              → aicp
//  5. "v", "session", "sender" and "type"                   → pvp
//
// Rules 2 and 3 are vacant.IsVacant and a2a.IsSend, so that detection and
// the validators cannot drift apart. The markers are the members that name the protocol; the values the
// validators check (jsonrpc "2.0", v 1, a signature) are not required for
// detection, so that a message that gets them wrong is reported with its
// protocol's errors (an unsigned AICP message gets missing_field
// signature, a PVP message with v 2 unsupported_version) rather than being
// passed over as a plain JSON file. (A signature is one of the
// AICP markers; requiring it would let an unsigned message slip through
// unreported.) For the same reason the media type is a
// hint: when the content matches none of the rules but the part is labelled
// application/vcp+json, application/aicp+json, application/a2a+json or
// application/pvp+json, it is checked as that protocol. When the content
// matches a rule, the content wins over the label.
//
// Anything else that parses is a plain JSON file: Protocol "", valid, no
// errors. A part that does not parse is Protocol "" with invalid_json.
// Detection parses leniently (encoding/json); each validator parses the
// bytes again with its own, stricter rules.
package tunnel
