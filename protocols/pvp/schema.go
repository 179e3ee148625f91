package pvp

// kind is the JSON shape a payload field must have.
type kind int

const (
	kString    kind = iota // a string
	kBool                  // true or false
	kCount                 // a non-negative integer
	kNumber                // any number
	kObject                // any object
	kAny                   // anything
	kStrings               // an array of strings
	kCounts                // an array of non-negative integers
	kEnum                  // a string from enum
	kEnums                 // an array of strings from enum
	kText                  // a string or an object (context content)
	kTime                  // an ISO 8601 timestamp string
	kStruct                // an object checked against sub
	kStructs               // an array of objects checked against sub
	kQuorum                // a QuorumRule (§14.2)
	kVisibleTo             // "all", "approvers_only" or participant ids (§12.1)
)

// field is one member of a payload schema.
type field struct {
	name string
	req  bool
	kind kind
	enum []string
	sub  []field
}

func req(name string, k kind) field { return field{name: name, req: true, kind: k} }
func opt(name string, k kind) field { return field{name: name, kind: k} }
func reqEnum(name string, e []string) field {
	return field{name: name, req: true, kind: kEnum, enum: e}
}
func optEnum(name string, e []string) field { return field{name: name, kind: kEnum, enum: e} }
func reqStruct(name string, sub []field) field {
	return field{name: name, req: true, kind: kStruct, sub: sub}
}
func optStruct(name string, sub []field) field { return field{name: name, kind: kStruct, sub: sub} }
func enums(name string, req bool, e []string) field {
	return field{name: name, req: req, kind: kEnums, enum: e}
}

// sessionConfig is SessionConfig (§6.2).
func sessionConfig() []field {
	return []field{
		enums("require_approval_for", true, toolCategories),
		req("default_gate_quorum", kQuorum),
		req("allow_forks", kBool),
		req("max_participants", kCount),
		reqEnum("ordering_mode", []string{"causal", "total"}),
		reqEnum("on_participant_timeout", []string{"wait", "skip", "pause_session"}),
		req("heartbeat_interval_seconds", kCount),
		req("idle_timeout_seconds", kCount),
		req("away_timeout_seconds", kCount),
	}
}

// partial makes every field optional: Partial<SessionConfig> (§6.6).
func partial(fs []field) []field {
	for i := range fs {
		fs[i].req = false
	}
	return fs
}

// announce is participant.announce (§7.1). TransportType is not
// enumerated by the spec, so any non-empty string is accepted.
func announce() []field {
	return []field{
		req("id", kString),
		req("name", kString),
		reqEnum("type", []string{"human", "agent"}),
		enums("roles", true, roles[:]),
		enums("capabilities", false, capabilities),
		req("transport", kString),
		opt("metadata", kObject),
	}
}

// contentRef is ContentRef (§9.2).
func contentRef() []field {
	return []field{
		req("hash", kString),
		req("size_bytes", kCount),
		req("mime_type", kString),
		reqEnum("storage", storages),
		opt("uri", kString),
	}
}

// schema returns the payload fields of a primitive (§6–§17).
func schema(msgType string) []field {
	switch msgType {
	case "session.create": // §6.1
		return []field{opt("name", kString), reqStruct("config", sessionConfig())}
	case "session.join": // §6.3
		return []field{reqStruct("participant", announce()), opt("token", kString), req("supported_versions", kCounts)}
	case "session.leave": // §6.4
		return []field{opt("reason", kString)}
	case "session.end": // §6.5
		return []field{req("reason", kString), reqEnum("final_state", []string{"completed", "aborted", "timeout"})}
	case "session.config_update": // §6.6
		return []field{reqStruct("changes", partial(sessionConfig())), req("reason", kString)}
	case "participant.announce": // §7.1
		return announce()
	case "participant.role_change": // §7.4
		return []field{req("participant", kString), enums("old_roles", true, roles[:]), enums("new_roles", true, roles[:]), req("changed_by", kString), opt("reason", kString)}
	case "heartbeat.ping", "heartbeat.pong": // §8.1: empty objects
		return nil
	case "presence.update": // §8.2
		return []field{req("participant", kString), reqEnum("status", presenceStatuses), req("last_active", kTime)}
	case "context.add": // §9.1
		return []field{req("key", kString), reqEnum("content_type", contentTypes), opt("content", kText), optStruct("content_ref", contentRef()),
			opt("visible_to", kStrings), opt("source", kString), opt("tags", kStrings)}
	case "context.update": // §9.3
		return []field{req("key", kString), opt("diff", kString), opt("new_content", kText), optStruct("new_content_ref", contentRef()), req("reason", kString)}
	case "context.remove": // §9.3
		return []field{req("key", kString), req("reason", kString)}
	case "secret.share": // §10
		return []field{req("key", kString), req("scope", kStrings), opt("expires_at", kTime), req("value_ref", kString), optEnum("secret_type", secretTypes)}
	case "secret.revoke": // §10
		return []field{req("key", kString), req("reason", kString)}
	case "prompt.draft": // §11.1
		return []field{req("content", kString), opt("target_agent", kString), req("contributors", kStrings)}
	case "prompt.submit": // §11.2
		return []field{req("content", kString), req("target_agent", kString), req("contributors", kStrings), req("context_keys", kStrings),
			optStruct("config", []field{opt("temperature", kNumber), opt("max_tokens", kCount), opt("tools_allowed", kStrings), opt("model", kString), opt("provider_params", kObject)})}
	case "prompt.amend": // §11.3
		return []field{req("original_prompt", kString), req("amendment", kString), req("reason", kString)}
	case "thinking.start": // §12.1
		return []field{req("agent", kString), req("prompt_ref", kString), req("visible_to", kVisibleTo)}
	case "thinking.chunk", "response.chunk": // §12
		return []field{req("text", kString)}
	case "thinking.end": // §12.1
		return []field{opt("summary", kString), opt("duration_ms", kCount)}
	case "response.start": // §12.2
		return []field{req("agent", kString), req("prompt_ref", kString)}
	case "response.end": // §12.2
		return []field{reqEnum("finish_reason", finishReasons), optStruct("usage", []field{req("input_tokens", kCount), req("output_tokens", kCount),
			opt("thinking_tokens", kCount), opt("cost_usd", kNumber), opt("model", kString), opt("latency_ms", kCount)})}
	case "tool.propose": // §13.1
		return []field{req("tool_name", kString), req("arguments", kObject), req("agent", kString), reqEnum("risk_level", riskLevels),
			req("description", kString), req("requires_approval", kBool), opt("suggested_approvers", kStrings), reqEnum("category", toolCategories)}
	case "tool.approve": // §13.2
		return []field{req("tool_proposal", kString), req("approver", kString), opt("comment", kString)}
	case "tool.reject": // §13.2
		return []field{req("tool_proposal", kString), req("rejector", kString), req("reason", kString), opt("suggestion", kString)}
	case "tool.execute": // §13.3
		return []field{req("tool_proposal", kString), req("approved_by", kStrings)}
	case "tool.output": // §13.3
		return []field{req("tool_proposal", kString), reqEnum("stream", []string{"stdout", "stderr"}), req("text", kString), req("complete", kBool)}
	case "tool.result": // §13.3
		return []field{req("tool_proposal", kString), req("success", kBool), opt("result", kAny), opt("error", kString), req("duration_ms", kCount)}
	case "gate.request": // §14.1
		return []field{reqEnum("action_type", gateActionTypes), req("action_ref", kString), req("quorum", kQuorum), req("timeout_seconds", kCount), req("message", kString)}
	case "gate.approve": // §14.3
		return []field{req("gate", kString), req("approver", kString), opt("comment", kString)}
	case "gate.reject": // §14.3
		return []field{req("gate", kString), req("rejector", kString), req("reason", kString)}
	case "gate.timeout": // §14.3
		return []field{req("gate", kString), req("approvals_received", kCount), req("approvals_required", kCount), reqEnum("resolution", timeoutOutcomes)}
	case "interrupt.raise": // §15.1
		return []field{opt("target", kString), reqEnum("urgency", urgencies), req("message", kString), opt("inject_context", kString), optStruct("inject_context_ref", contentRef())}
	case "interrupt.acknowledge": // §15.2
		return []field{req("interrupt", kString), req("by", kString), reqEnum("action_taken", ackActions), opt("ignore_reason", kString)}
	case "fork.create": // §16.1
		return []field{req("name", kString), req("from_point", kString), req("reason", kString), req("participants", kStrings), req("copy_context", kBool)}
	case "fork.switch": // §16.2
		return []field{req("target_fork", kString)}
	case "merge.propose": // §16.3
		return []field{req("source_fork", kString), req("target_fork", kString), reqEnum("strategy", mergeStrategies), req("summary", kString)}
	case "merge.execute": // §16.3
		return []field{req("merge_proposal", kString), {name: "resolved_conflicts", kind: kStructs, sub: []field{
			req("conflict_id", kString), reqEnum("resolution", []string{"use_source", "use_target", "custom"}), opt("custom_value", kAny)}}}
	case "error": // §17
		return []field{reqEnum("code", errorCodes), req("message", kString), req("recoverable", kBool), opt("details", kObject), opt("related_to", kString)}
	}
	return nil
}
