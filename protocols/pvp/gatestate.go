package pvp

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/envelopd/envelopd/protocols"
)

// Store state behind gates (§14) and interrupts (§15). Keys are
// session + "\x00" + the message id of the gate.request / interrupt.raise
// (gate.approve's "gate", interrupt.acknowledge's "interrupt"); votes add
// "\x00" + the voter.
const (
	// GateKind (state): "open" after gate.request; "rejected" after a
	// gate.reject (§14.3: any rejection fails the gate at once);
	// "timed_out" after a gate.timeout resolving it ("rejected" or
	// "auto_approved"; "escalated" leaves it open).
	GateKind = "pvp_gate"
	// GateRequestKind (claim): the gate's quorum rule (Quorum.Rule). The
	// same gate.request again is a marked replay; the same gate id with
	// another rule is invalid_field.
	GateRequestKind = "pvp_gate_request"
	// GateClosedKind (claim): "counting" for a gate whose quorum needs more
	// than one approval (claimed by its gate.request, so that approvals
	// leave it alone); "closed" once a gate that one approval resolves
	// ({"type":"any","count":1}) has had its approval, or has been
	// rejected. Every vote claims "closed": on a closed gate that is
	// invalid_field.
	GateClosedKind = "pvp_gate_closed"
	// GateVoteKind (claim): "approve" or "reject", one per voter and gate;
	// a second vote by the same voter is replay_detected.
	GateVoteKind = "pvp_gate_vote"
	// InterruptKind (state): the urgency of an interrupt.raise, fixed
	// once recorded.
	InterruptKind = "pvp_interrupt"
)

// gateState turns gate and interrupt messages into store rules:
//
//   - gate.request records the gate open with its quorum rule;
//   - gate.approve / gate.reject (sender = voter) need the gate open
//     (unknown or resolved: invalid_field) and record one vote per voter
//     (a second: replay_detected); a reject resolves the gate rejected, an
//     approval resolves a gate whose rule one approval meets;
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
		rule := "invalid"
		if ok {
			rule = q.Rule()
		}
		claims := []protocols.Claim{{Kind: GateRequestKind, Key: key(id), Value: rule,
			OnConflict: protocols.CodeInvalidField}}
		if !ok || !closesOnFirstApproval(q) {
			claims = append(claims, protocols.Claim{Kind: GateClosedKind, Key: key(id), Value: "counting",
				OnConflict: protocols.CodeInvalidField})
		}
		return claims, nil, []protocols.StateSet{{Kind: GateKind, Key: key(id), Value: "open",
			Keep: []string{"open", "rejected", "timed_out"}}}
	case "gate.approve", "gate.reject":
		gate, _ := payload["gate"].(string)
		vote := "approve"
		if typ == "gate.reject" {
			vote = "reject"
		}
		claims := []protocols.Claim{
			{Kind: GateVoteKind, Key: key(gate) + "\x00" + sender, Value: vote,
				OnSame: protocols.CodeReplayDetected, OnConflict: protocols.CodeReplayDetected},
			{Kind: GateClosedKind, Key: key(gate), Value: "closed", OnSame: protocols.CodeInvalidField},
		}
		checks := []protocols.StateCheck{{Kind: GateKind, Key: key(gate), Want: "open", Default: protocols.CodeInvalidField}}
		var sets []protocols.StateSet
		if vote == "reject" {
			sets = append(sets, protocols.StateSet{Kind: GateKind, Key: key(gate), Value: "rejected"})
		}
		return claims, checks, sets
	case "gate.timeout":
		gate, _ := payload["gate"].(string)
		if r, _ := payload["resolution"].(string); r == "rejected" || r == "auto_approved" {
			return nil, nil, []protocols.StateSet{{Kind: GateKind, Key: key(gate), Value: "timed_out",
				Keep: []string{"", "rejected"}}}
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

// closesOnFirstApproval reports whether one approval meets q, whoever
// gives it: GateResolved with one approval and no eligible count (so
// "all", "specific" and "majority", which need the approvers the store does
// not count, never qualify; nor does "role", which needs the voter's role).
func closesOnFirstApproval(q Quorum) bool {
	if q.Type == "role" {
		return false
	}
	resolved, approved := GateResolved(q.Rule(), 1, 0, 0)
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
