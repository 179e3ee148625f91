package pvp

import "github.com/envelopd/envelopd/protocols"

// PermKind names the store state behind role enforcement: one entry per
// (session, participant, permission), "granted" or "denied".
const PermKind = "pvp_perm"

var permissions = [...]Permission{Prompt, Approve, Interrupt, Fork, ManageParticipants, EndSession, Configure}

// sessionState turns a valid PVP message into store state (§6, §7):
//
//   - session.create: the creator administers the session it configures
//     (every permission);
//   - session.join: the joiner's permissions from its announced roles and
//     capabilities (§7.2, §7.3); a participant already known keeps what it
//     has — only participant.role_change changes it;
//   - participant.role_change (itself needing manage_participants, §7.4):
//     the participant's permissions from new_roles;
//   - every message type the table of §7.2 restricts needs its permission
//     granted to the sender in that session, else unauthorized.
//
// Over email the sender is the envelope's own claim (DKIM vouches for the
// mail's domain, not for PVP ids); a careful agent binds ids to addresses.
func sessionState(env map[string]any) ([]protocols.StateCheck, []protocols.StateSet) {
	session, _ := env["session"].(string)
	sender, _ := env["sender"].(string)
	typ, _ := env["type"].(string)
	payload, _ := env["payload"].(map[string]any)
	key := func(who string, p Permission) string { return session + "\x00" + who + "\x00" + string(p) }
	grant := func(who string, roles, caps []string, keep bool) []protocols.StateSet {
		var sets []protocols.StateSet
		for _, p := range permissions {
			v := "denied"
			if permitted(roles, caps, p) {
				v = "granted"
			}
			s := protocols.StateSet{Kind: PermKind, Key: key(who, p), Value: v}
			if keep {
				s.Keep = []string{"granted", "denied"}
			}
			sets = append(sets, s)
		}
		return sets
	}
	var checks []protocols.StateCheck
	var sets []protocols.StateSet
	switch typ {
	case "session.create":
		sets = grant(sender, []string{"admin"}, nil, false)
	case "session.join":
		part, _ := payload["participant"].(map[string]any)
		who, _ := part["id"].(string)
		if who == "" {
			who = sender
		}
		sets = grant(who, strs(part["roles"]), strs(part["capabilities"]), true)
	case "participant.role_change":
		who, _ := payload["participant"].(string)
		sets = grant(who, strs(payload["new_roles"]), nil, false)
	}
	if p, ok := Requires(typ); ok {
		checks = append(checks, protocols.StateCheck{Kind: PermKind, Key: key(sender, p), Want: "granted",
			Default: protocols.CodeUnauthorized})
	}
	return checks, sets
}

// permitted reports whether roles or capabilities grant p (§7.2, §7.3;
// configure is the admin role's alone).
func permitted(roles, caps []string, p Permission) bool {
	for _, r := range roles {
		if RoleCan(r, p) {
			return true
		}
	}
	if p == Configure {
		return false
	}
	for _, c := range caps {
		if Permission(c) == p {
			return true
		}
	}
	return false
}

func strs(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
