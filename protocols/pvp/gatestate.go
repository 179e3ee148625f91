package pvp

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/envelopd/envelopd/protocols"
)

// Store state behind gates (§14) and interrupts (§15). Keys are
// session + "\x00" + the message id of the gate.request / interrupt.raise
// (gate.approve's "gate", interrupt.acknowledge's "interrupt"); votes add
// "\x00" + the voter.
const (
	// GateKind (state): "open" after gate.request; "approved" once its
	// approvals meet its quorum (counted by the approval that meets it);
	// "rejected" after a gate.reject (§14.3: any rejection fails the gate
	// at once); "timed_out" after a gate.timeout resolving it ("rejected"
	// or "auto_approved"; "escalated" leaves it open). Votes need "open".
	GateKind = "pvp_gate"
	// GateRequestKind (claim): the gate's quorum rule (Quorum.Rule). The
	// same gate.request again is a marked replay; the same gate id with
	// another quorum is invalid_field (reported by its GateVoteKind
	// quorum entry, which holds the whole rule).
	GateRequestKind = "pvp_gate_request"
	// GateVoteKind (claim): "approve" or "reject", one per voter and gate
	// (key + "\x00" + voter); a second vote by the same voter is
	// replay_detected. The gate.request also claims key + "\x00" (an empty
	// voter, which no valid envelope has) with "quorum:" and the quorum's
	// JSON, so that the approvals can be tallied against it.
	GateVoteKind = "pvp_gate_vote"
	// InterruptKind (state): the urgency of an interrupt.raise, fixed
	// once recorded.
	InterruptKind = "pvp_interrupt"
)

// quorumPrefix marks the quorum entry among a gate's votes.
const quorumPrefix = "quorum:"

// gateState turns gate and interrupt messages into store rules:
//
//   - gate.request records the gate open with its quorum rule;
//   - gate.approve / gate.reject (sender = voter) need the gate open
//     (unknown or resolved: invalid_field) and record one vote per voter
//     (a second: replay_detected); a reject resolves the gate rejected, an
//     approval resolves it approved when, its own vote counted, the
//     gate's votes meet the quorum (gateTally);
//   - gate.timeout with resolution rejected / auto_approved resolves it;
//   - interrupt.raise records its urgency; interrupt.acknowledge with
//     action_taken "ignored" needs an interrupt that may be ignored
//     (AckAllowed: pause; stop / emergency, or an unknown interrupt:
//     invalid_field).
func gateState(env map[string]any) ([]protocols.Claim, []protocols.StateCheck, []protocols.StateSet) {
	session, _ := env["session"].(string)
	sender, _ := env["sender"].(string)
	id, _ := env["id"].(string)
	typ, _ := env["type"].(string)
	payload, _ := env["payload"].(map[string]any)
	key := func(ref string) string { return session + "\x00" + ref }
	switch typ {
	case "gate.request":
		q, ok := quorumOf(payload["quorum"])
		rule, quorum := "invalid", quorumPrefix
		if ok {
			rule = q.Rule()
			if b, err := json.Marshal(q); err == nil {
				quorum += string(b)
			}
		}
		claims := []protocols.Claim{
			{Kind: GateRequestKind, Key: key(id), Value: rule},
			{Kind: GateVoteKind, Key: key(id) + "\x00", Value: quorum, OnConflict: protocols.CodeInvalidField},
		}
		return claims, nil, []protocols.StateSet{{Kind: GateKind, Key: key(id), Value: "open",
			Keep: []string{"open", "approved", "rejected", "timed_out"}}}
	case "gate.approve", "gate.reject":
		gate, _ := payload["gate"].(string)
		vote := "approve"
		if typ == "gate.reject" {
			vote = "reject"
		}
		claims := []protocols.Claim{
			{Kind: GateVoteKind, Key: key(gate) + "\x00" + sender, Value: vote,
				OnSame: protocols.CodeReplayDetected, OnConflict: protocols.CodeReplayDetected},
		}
		checks := []protocols.StateCheck{{Kind: GateKind, Key: key(gate), Want: "open", Default: protocols.CodeInvalidField}}
		set := protocols.StateSet{Kind: GateKind, Key: key(gate), Value: "rejected"}
		if vote == "approve" {
			set.Value = "approved"
			set.If = &protocols.Tally{Kind: GateVoteKind, Prefix: key(gate) + "\x00",
				StateKind: PermKind, StatePrefix: session + "\x00", Rule: gateTally{}}
		}
		return claims, checks, []protocols.StateSet{set}
	case "gate.timeout":
		gate, _ := payload["gate"].(string)
		if r, _ := payload["resolution"].(string); r == "rejected" || r == "auto_approved" {
			return nil, nil, []protocols.StateSet{{Kind: GateKind, Key: key(gate), Value: "timed_out",
				Keep: []string{"", "approved", "rejected"}}}
		}
	case "interrupt.raise":
		urgency, _ := payload["urgency"].(string)
		return nil, nil, []protocols.StateSet{{Kind: InterruptKind, Key: key(id), Value: urgency, Keep: urgencies}}
	case "interrupt.acknowledge":
		if payload["action_taken"] != "ignored" {
			return nil, nil, nil
		}
		ref, _ := payload["interrupt"].(string)
		c := protocols.StateCheck{Kind: InterruptKind, Key: key(ref), Want: "pause", Codes: map[string]protocols.Code{},
			Default: protocols.CodeInvalidField}
		for _, u := range urgencies {
			if !AckAllowed(u, "ignored") {
				c.Codes[u] = protocols.CodeInvalidField
			}
		}
		return nil, []protocols.StateCheck{c}, nil
	}
	return nil, nil, nil
}

// gateTally is the rule of an approval's Tally: votes are the gate's
// GateVoteKind claims (voter → "approve" / "reject", and "" → the quorum),
// perms the session's PermKind states (participant + "\x00" + permission →
// "granted" / "denied"). It counts with GateResolved:
//
//   - "any" and "role": every approval (the voter's role is not known to
//     the store, only its permissions, so a "role" quorum counts approvals
//     by anyone holding the approve permission);
//   - "specific": approvals by the listed participants; eligible is the
//     number listed;
//   - "all" and "majority": eligible is the number of session participants
//     holding the approve permission when the approval arrives.
//
// Rejections are left out: a reject resolves the gate itself.
type gateTally struct{}

// Resolved reports whether the approvals meet the gate's quorum.
func (gateTally) Resolved(votes, perms map[string]string) bool {
	raw, ok := votes[""]
	if !ok || !strings.HasPrefix(raw, quorumPrefix) {
		return false
	}
	q, err := ParseQuorum([]byte(raw[len(quorumPrefix):]))
	if err != nil {
		return false
	}
	listed := map[string]bool{}
	for _, p := range q.Participants {
		listed[p] = true
	}
	approvals := 0
	for voter, v := range votes {
		if voter != "" && v == "approve" && (q.Type != "specific" || listed[voter]) {
			approvals++
		}
	}
	eligible := 0
	switch q.Type {
	case "specific":
		eligible = len(listed)
	case "all", "majority":
		for k, v := range perms {
			if who, p, ok := strings.Cut(k, "\x00"); ok && who != "" && p == string(Approve) && v == "granted" {
				eligible++
			}
		}
	}
	resolved, approved := GateResolved(q.Rule(), approvals, 0, eligible)
	return resolved && approved
}

// quorumOf parses a validated QuorumRule member with ParseQuorum; counts
// written as JavaScript numbers (2.0) are made integers first.
func quorumOf(v any) (Quorum, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Quorum{}, false
	}
	n := make(map[string]any, len(m))
	for k, x := range m {
		if num, ok := x.(json.Number); ok {
			if f, err := strconv.ParseFloat(string(num), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<31 {
				x = int(f)
			}
		}
		n[k] = x
	}
	b, err := json.Marshal(n)
	if err != nil {
		return Quorum{}, false
	}
	q, err := ParseQuorum(b)
	return q, err == nil
}
