package pvp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/protocols"
)

// ruleStore applies a Report's Claims, Checks and Sets the way the store
// does (store/unique.go: claims, then checks, then sets, in one
// transaction; everything undone unless the message is accepted), so that
// the stateful rules can be played here without a database.
type ruleStore struct {
	claims map[[2]string]string
	states map[[2]string]string
}

func (s *ruleStore) apply(r protocols.Report) string {
	if !r.Valid {
		return "invalid:" + codeList(r.Errors)
	}
	claims := map[[2]string]string{}
	states := map[[2]string]string{}
	for k, v := range s.claims {
		claims[k] = v
	}
	for k, v := range s.states {
		states[k] = v
	}
	var ps protocols.Problems
	replay := false
	for _, c := range r.Claims {
		k := [2]string{c.Kind, c.Key}
		v, ok := claims[k]
		switch {
		case !ok:
			claims[k] = c.Value
		case v == c.Value:
			replay = true
			if c.OnSame != "" {
				ps = append(ps, protocols.New(c.OnSame, "", "%s", c.Kind))
			}
		case c.OnConflict != "":
			ps = append(ps, protocols.New(c.OnConflict, "", "%s", c.Kind))
		}
	}
	for _, c := range r.Checks {
		v := states[[2]string{c.Kind, c.Key}]
		if v == c.Want {
			continue
		}
		code, ok := c.Codes[v]
		if !ok {
			code = c.Default
		}
		ps = append(ps, protocols.New(code, "", "%s", c.Kind))
	}
	for _, st := range r.Sets {
		if t := st.If; t != nil && !t.Rule.Resolved(prefixed(claims, t.Kind, t.Prefix), prefixed(states, t.StateKind, t.StatePrefix)) {
			continue
		}
		k := [2]string{st.Kind, st.Key}
		if !oneOf(states[k], st.Keep) {
			states[k] = st.Value
		}
	}
	switch {
	case len(ps) > 0:
		return codeList(ps)
	case replay:
		return "replay"
	}
	s.claims, s.states = claims, states
	return "accepted"
}

// prefixed is the store's range read of a Tally: key (prefix removed) →
// value of the entries of kind whose key starts with prefix.
func prefixed(m map[[2]string]string, kind, prefix string) map[string]string {
	out := map[string]string{}
	if kind == "" {
		return out
	}
	for k, v := range m {
		if k[0] == kind && strings.HasPrefix(k[1], prefix) {
			out[k[1][len(prefix):]] = v
		}
	}
	return out
}

func codeList(ps protocols.Problems) string {
	var s []string
	for _, p := range ps {
		s = append(s, string(p.Code))
	}
	return strings.Join(s, ",")
}

// stateMessage builds the PVP message of one gatestate.table line.
func stateMessage(t *testing.T, n int, session, sender, typ, arg string) []byte {
	t.Helper()
	id := fmt.Sprintf("m%d", n)
	name, val, _ := strings.Cut(arg, "=")
	var payload map[string]any
	switch typ {
	case "session.create":
		payload = map[string]any{"name": "s", "config": map[string]any{
			"require_approval_for": []string{}, "default_gate_quorum": map[string]any{"type": "any", "count": 1},
			"allow_forks": true, "max_participants": 9, "ordering_mode": "causal", "on_participant_timeout": "skip",
			"heartbeat_interval_seconds": 30, "idle_timeout_seconds": 120, "away_timeout_seconds": 300}}
	case "session.join":
		payload = map[string]any{"participant": map[string]any{"id": sender, "name": sender, "type": "human",
			"roles": strings.Split(arg, ","), "capabilities": []string{}, "transport": "websocket"}, "supported_versions": []int{1}}
	case "gate.request":
		id = name
		var q map[string]any
		if err := json.Unmarshal([]byte(val), &q); err != nil {
			t.Fatalf("quorum %s: %v", val, err)
		}
		payload = map[string]any{"action_type": "tool", "action_ref": "t1", "quorum": q, "timeout_seconds": 60, "message": "m"}
	case "gate.approve":
		payload = map[string]any{"gate": arg, "approver": sender}
	case "gate.reject":
		payload = map[string]any{"gate": arg, "rejector": sender, "reason": "no"}
	case "gate.timeout":
		payload = map[string]any{"gate": name, "approvals_received": 0, "approvals_required": 1, "resolution": val}
	case "interrupt.raise":
		id = name
		payload = map[string]any{"urgency": val, "message": "m"}
	case "interrupt.acknowledge":
		payload = map[string]any{"interrupt": name, "by": sender, "action_taken": val}
		if val == "ignored" {
			payload["ignore_reason"] = "busy"
		}
	default:
		t.Fatalf("gatestate.table: no builder for %s", typ)
	}
	b, err := json.Marshal(map[string]any{"v": 1, "id": id, "ts": "2026-01-30T20:00:00.000Z", "session": session,
		"sender": sender, "type": typ, "payload": payload})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGateAndInterruptState plays gatestate.table: each scenario is a fresh
// store; each line a message and the outcome its rules give.
func TestGateAndInterruptState(t *testing.T) {
	var s *ruleStore
	scenario := ""
	n := 0
	for _, f := range tableLines(t, "gatestate.table") {
		if f[0] == "scenario" {
			scenario, s = f[1], &ruleStore{claims: map[[2]string]string{}, states: map[[2]string]string{}}
			continue
		}
		if len(f) != 5 || s == nil {
			t.Fatalf("gatestate.table: bad line %q", f)
		}
		n++
		r := Validate(stateMessage(t, n, f[0], f[1], f[2], f[3]))
		if got := s.apply(r); got != f[4] {
			t.Errorf("%s: %s %s %s: got %s, want %s", scenario, f[1], f[2], f[3], got, f[4])
		}
	}
}

// TestGateStateKeys pins the exact rules a vote emits (kinds, codes).
func TestGateStateKeys(t *testing.T) {
	r := Validate(stateMessage(t, 1, "s1", "bob", "gate.approve", "G1"))
	if !r.Valid {
		t.Fatal(r.Errors)
	}
	want := []protocols.Claim{
		{Kind: GateVoteKind, Key: "s1\x00G1\x00bob", Value: "approve", OnSame: protocols.CodeReplayDetected, OnConflict: protocols.CodeReplayDetected},
	}
	if fmt.Sprint(r.Claims) != fmt.Sprint(want) {
		t.Errorf("claims %+v, want %+v", r.Claims, want)
	}
	var gateCheck bool
	for _, c := range r.Checks {
		if c.Kind == GateKind {
			gateCheck = c.Key == "s1\x00G1" && c.Want == "open" && c.Default == protocols.CodeInvalidField
		}
	}
	if !gateCheck {
		t.Errorf("checks %+v: no open-gate check with invalid_field", r.Checks)
	}
	var tally *protocols.Tally
	for _, st := range r.Sets {
		if st.Kind == GateKind && st.Key == "s1\x00G1" && st.Value == "approved" {
			tally = st.If
		}
	}
	if tally == nil || tally.Kind != GateVoteKind || tally.Prefix != "s1\x00G1\x00" ||
		tally.StateKind != PermKind || tally.StatePrefix != "s1\x00" {
		t.Fatalf("sets %+v: no approved set with a vote tally", r.Sets)
	}
	votes := map[string]string{"": `quorum:{"type":"any","count":2}`, "bob": "approve"}
	if tally.Rule.Resolved(votes, nil) {
		t.Error("any:2 resolved by one approval")
	}
	votes["carol"] = "approve"
	if !tally.Rule.Resolved(votes, nil) {
		t.Error("any:2 not resolved by two approvals")
	}
}
