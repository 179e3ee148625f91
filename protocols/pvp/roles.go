package pvp

// Permission is a column of the role table (§7.2). Its value is the name of
// the capability (§7.3) that grants it, except Configure, which only the
// admin role has (§6.6: configuration is changed by admin participants).
type Permission string

const (
	Prompt             Permission = "prompt"
	Approve            Permission = "approve"
	Interrupt          Permission = "interrupt"
	Fork               Permission = "fork"
	ManageParticipants Permission = "manage_participants"
	EndSession         Permission = "end_session"
	Configure          Permission = "configure"
)

// Requires returns the permission a message type needs, and false for the
// types the table of §7.2 does not restrict:
//
//	prompt.draft, prompt.submit, prompt.amend        Prompt
//	tool.approve, tool.reject, gate.approve/reject   Approve
//	interrupt.raise                                  Interrupt
//	fork.create, merge.propose, merge.execute        Fork
//	participant.role_change                          ManageParticipants (§7.4)
//	session.end                                      EndSession (§6.5)
//	session.config_update                            Configure (§6.6)
//
// Drafting counts as prompting: a navigator guides "without direct
// prompting" (§2). Merging a fork back needs the fork permission.
func Requires(msgType string) (Permission, bool) {
	switch msgType {
	case "prompt.draft", "prompt.submit", "prompt.amend":
		return Prompt, true
	case "tool.approve", "tool.reject", "gate.approve", "gate.reject":
		return Approve, true
	case "interrupt.raise":
		return Interrupt, true
	case "fork.create", "merge.propose", "merge.execute":
		return Fork, true
	case "participant.role_change":
		return ManageParticipants, true
	case "session.end":
		return EndSession, true
	case "session.config_update":
		return Configure, true
	}
	return "", false
}

// RoleCan reports whether a role has a permission: the table of §7.2.
func RoleCan(role string, p Permission) bool {
	switch role {
	case "driver":
		return p == Prompt || p == Interrupt || p == Fork
	case "navigator":
		return p == Approve || p == Interrupt || p == Fork
	case "adversary":
		return p == Prompt || p == Approve || p == Interrupt || p == Fork
	case "observer":
		return false
	case "approver":
		return p == Approve || p == Interrupt
	case "admin":
		switch p {
		case Prompt, Approve, Interrupt, Fork, ManageParticipants, EndSession, Configure:
			return true
		}
	}
	return false
}

// Allowed reports whether a participant holding role may send a message of
// msgType under §7.2. Types the table does not restrict are allowed to every
// role; an unknown role or an unknown type is never allowed.
func Allowed(role, msgType string) bool {
	if !oneOf(role, roles[:]) || !IsPrimitive(msgType) {
		return false
	}
	p, restricted := Requires(msgType)
	return !restricted || RoleCan(role, p)
}

// Permitted reports whether a participant with these roles and capabilities
// may send msgType: one role allowing it is enough (§7.2 "MAY hold multiple
// roles"), and a capability grants the permission of the same name (§7.3).
func Permitted(roles, capabilities []string, msgType string) bool {
	for _, r := range roles {
		if Allowed(r, msgType) {
			return true
		}
	}
	p, restricted := Requires(msgType)
	if !restricted || !IsPrimitive(msgType) {
		return false
	}
	for _, c := range capabilities {
		if Permission(c) == p && p != Configure {
			return true
		}
	}
	return false
}
