// Package pvp checks messages of the Pair Vibecoding Protocol (PVP,
// pvp-v1.0.0-draft.md) as they arrive tunnelled in mail, without state, and
// offers the pure rules the stateful layer needs: the primitive list (§4.3),
// the role-permission table (§7.2) and gate quorum evaluation (§14.2–14.3).
//
// Validate checks:
//
//   - the envelope of §4.1: v, id, ts, session, sender, type and payload are
//     required; ref, seq, causal_refs and fork are optional but typed. v must
//     be 1 (§3.3: any other number is unsupported_version);
//   - type is one of the 41 primitives (the table of §4.3 lists 41 although
//     the text says 40; tool.output was added): unknown_type otherwise;
//   - the payload of each type: required fields are missing_field, a value
//     of the wrong JSON type or outside its enumeration is invalid_field.
//     The fields come from the spec sections (§6–§17); where a section names
//     a primitive without listing its fields (thinking.*, response.*,
//     tool.approve/reject/execute/output, gate.approve/reject,
//     context.update/remove, secret.revoke, fork.switch, merge.execute), they
//     come from the reference implementation's protocol types, which is what
//     peers send (Appendix A's tool.approve matches them). Unknown members are
//     ignored. Ids are opaque (§5.1): ULID syntax is not enforced;
//   - the rules stated in prose: context.add needs content or content_ref
//     (§9.1); session.join must support version 1 (§6.3, unsupported_version);
//     interrupt.acknowledge with action_taken "ignored" needs an ignore_reason
//     (§15.2); secret.share carries value_ref, never a value (§20.3).
//
// Whether an "ignored" acknowledgement answers a stop or emergency interrupt
// needs the interrupt it refers to; AckAllowed gives the rule for the layer
// that has it.
//
// Timestamps (ts, last_active, expires_at) are ISO 8601 as the reference
// writes them (JavaScript toISOString): RFC 3339, or the same form without a
// zone.
package pvp
