// Package pvp checks messages of the Pair Vibecoding Protocol (PVP,
// pvp-v1.0.0-draft.md) as they arrive tunnelled in mail, without state, and
// offers the pure rules the stateful layer needs: the primitive list (§4.3),
// the role-permission table (§7.2) and gate quorum evaluation (§14.2–14.3),
// and emits the store-backed rules of roles, gates and interrupts.
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
// Stateful rules are handed to the store as Claims, StateChecks and
// StateSets (applied in the ingest transaction, undone unless the message
// is accepted; see state.go and gatestate.go):
//
//   - roles (§7.2, §7.3): session.create / session.join /
//     participant.role_change grant permissions; a restricted type sent
//     without its permission is unauthorized;
//   - gates (§14): gate.request records the gate open and its quorum rule
//     (Quorum.Rule, via ParseQuorum). gate.approve and gate.reject are votes
//     by the envelope's sender: one vote per voter and gate (a second vote,
//     either way, is replay_detected). A vote on a gate that was never
//     requested in the session, or that is resolved, is invalid_field: §17
//     calls this INVALID_STATE, which has no envelopd code of its own, and
//     the problem is the value of payload.gate. A gate.reject resolves the
//     gate rejected (§14.3: any rejection fails it at once); a gate.timeout
//     with resolution rejected or auto_approved resolves it too. Approvals
//     are counted: each carries a StateSet "approved" conditional on a
//     protocols.Tally, which the store evaluates in the ingest transaction
//     over the gate's votes and quorum (and, for "all" and "majority", the
//     session's approve permissions), so the approval that meets the
//     quorum (GateResolved) resolves the gate approved, and later votes are
//     refused;
//   - interrupts (§15): interrupt.raise records its urgency (first value
//     kept); interrupt.acknowledge with action_taken "ignored" is
//     invalid_field unless that interrupt's urgency is pause (AckAllowed:
//     stop and emergency may not be ignored), and also when the interrupt
//     was never seen in the session, since nothing shows it was a pause.
//
// How quorums are counted (gateTally): "any" counts every approval;
// "specific" the approvals of the listed participants, against their
// number; "all" and "majority" the approvals against the participants of
// the session holding the approve permission when the approval arrives
// (the creator, as admin, is one). Not enforced: voter eligibility beyond
// the approve permission — an approval by a participant outside a "role"
// or "specific" quorum is accepted (in "specific" it is not counted), and
// a "role" quorum counts every approval, since the store keeps
// permissions, not roles. Votes are tied to the envelope's sender, not to
// payload.approver / rejector. Gates approved before approvals were
// counted (then marked by a pvp_gate_closed claim, no longer read) still
// show "open" and take further votes.
//
// Timestamps (ts, last_active, expires_at) are ISO 8601 as the reference
// writes them (JavaScript toISOString): RFC 3339, or the same form without a
// zone.
package pvp
