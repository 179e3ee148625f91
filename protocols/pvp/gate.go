package pvp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Quorum is a QuorumRule (§14.2).
type Quorum struct {
	Type         string   `json:"type"`
	Count        int      `json:"count,omitempty"`
	Role         string   `json:"role,omitempty"`
	Participants []string `json:"participants,omitempty"`
}

// ParseQuorum decodes and checks a QuorumRule object.
func ParseQuorum(data []byte) (Quorum, error) {
	var q Quorum
	if err := json.Unmarshal(data, &q); err != nil {
		return Quorum{}, fmt.Errorf("pvp: quorum rule: %w", err)
	}
	switch q.Type {
	case "all", "majority":
	case "any":
		if q.Count < 1 {
			return Quorum{}, fmt.Errorf("pvp: quorum rule any: count must be at least 1")
		}
	case "role":
		if q.Count < 1 || !oneOf(q.Role, roles[:]) {
			return Quorum{}, fmt.Errorf("pvp: quorum rule role: needs a known role and a count of at least 1")
		}
	case "specific":
		if len(q.Participants) == 0 {
			return Quorum{}, fmt.Errorf("pvp: quorum rule specific: no participants")
		}
	default:
		return Quorum{}, fmt.Errorf("pvp: unknown quorum rule type %q", q.Type)
	}
	return q, nil
}

// Rule is the rule string GateResolved takes: "any:N", "all",
// "role:ROLE:N", "specific" or "majority".
func (q Quorum) Rule() string {
	switch q.Type {
	case "any":
		return "any:" + strconv.Itoa(q.Count)
	case "role":
		return "role:" + q.Role + ":" + strconv.Itoa(q.Count)
	}
	return q.Type
}

// GateResolved evaluates a gate (§14.3) from counts the caller keeps:
//
//   - any rejection resolves the gate, not approved ("Any participant
//     rejects. Gate fails immediately");
//   - "any:N": approvals ≥ N;
//   - "role:ROLE:N": approvals ≥ N, where the caller counts only approvals
//     from holders of ROLE;
//   - "all": eligible > 0 and approvals ≥ eligible, eligible being the
//     participants with the approve permission;
//   - "specific": eligible > 0 and approvals ≥ eligible, eligible being the
//     number of listed participants and approvals counted among them;
//   - "majority": eligible > 0 and 2·approvals > eligible (">50%", §14.2;
//     the reference server uses ceil(eligible/2), which passes a tie — the
//     spec text is followed here).
//
// A gate not yet at quorum, or a malformed rule, is (false, false).
// Timeouts are reported separately by gate.timeout.
func GateResolved(rule string, approvals, rejections, eligible int) (resolved bool, approved bool) {
	if rejections > 0 {
		return true, false
	}
	parts := strings.Split(rule, ":")
	met := false
	switch {
	case rule == "all" || rule == "specific":
		met = eligible > 0 && approvals >= eligible
	case rule == "majority":
		met = eligible > 0 && 2*approvals > eligible
	case len(parts) == 2 && parts[0] == "any":
		n, err := strconv.Atoi(parts[1])
		met = err == nil && n >= 1 && approvals >= n
	case len(parts) == 3 && parts[0] == "role" && oneOf(parts[1], roles[:]):
		n, err := strconv.Atoi(parts[2])
		met = err == nil && n >= 1 && approvals >= n
	}
	return met, met
}
