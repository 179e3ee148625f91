package pvp

// Version is the only protocol version (§3.3).
const Version = 1

// Protocol is the Report.Protocol of a PVP message.
const Protocol = "pvp"

// primitives is the table of §4.3, in its order.
var primitives = [...]string{
	"session.create", "session.join", "session.leave", "session.end", "session.config_update",
	"participant.announce", "participant.role_change",
	"heartbeat.ping", "heartbeat.pong",
	"presence.update",
	"context.add", "context.update", "context.remove",
	"secret.share", "secret.revoke",
	"prompt.draft", "prompt.submit", "prompt.amend",
	"thinking.start", "thinking.chunk", "thinking.end",
	"response.start", "response.chunk", "response.end",
	"tool.propose", "tool.approve", "tool.reject", "tool.execute", "tool.output", "tool.result",
	"gate.request", "gate.approve", "gate.reject", "gate.timeout",
	"interrupt.raise", "interrupt.acknowledge",
	"fork.create", "fork.switch",
	"merge.propose", "merge.execute",
	"error",
}

// Primitives returns the 41 message types of §4.3 in the spec's order.
func Primitives() []string {
	return append([]string(nil), primitives[:]...)
}

// IsPrimitive reports whether t is one of the 41 message types.
func IsPrimitive(t string) bool {
	for _, p := range primitives {
		if p == t {
			return true
		}
	}
	return false
}

// Roles are the roles of §7.2.
var roles = [...]string{"driver", "navigator", "adversary", "observer", "approver", "admin"}

// Enumerations of the spec sections.
var (
	toolCategories   = []string{"file_read", "file_write", "file_delete", "shell_execute", "network_request", "deploy", "database", "secret_access", "external_api", "all"}                                                                          // §6.2
	capabilities     = []string{"prompt", "approve", "interrupt", "fork", "add_context", "manage_participants", "end_session"}                                                                                                                       // §7.3
	contentTypes     = []string{"text", "file", "reference", "structured", "image", "audio_transcript"}                                                                                                                                              // §9.1
	storages         = []string{"inline", "local", "s3", "ipfs"}                                                                                                                                                                                     // §9.2
	secretTypes      = []string{"api_key", "database_url", "token", "credential", "other"}                                                                                                                                                           // §10
	presenceStatuses = []string{"active", "idle", "away", "disconnected"}                                                                                                                                                                            // §8.2
	finishReasons    = []string{"complete", "interrupted", "error", "max_tokens", "tool_use"}                                                                                                                                                        // §12.2
	riskLevels       = []string{"low", "medium", "high", "critical"}                                                                                                                                                                                 // §13.1
	gateActionTypes  = []string{"tool", "deploy", "prompt", "context_change", "session_config", "participant_add", "fork", "merge"}                                                                                                                  // §14.1
	quorumTypes      = []string{"any", "all", "role", "specific", "majority"}                                                                                                                                                                        // §14.2
	timeoutOutcomes  = []string{"rejected", "auto_approved", "escalated"}                                                                                                                                                                            // §14.3
	urgencies        = []string{"pause", "stop", "emergency"}                                                                                                                                                                                        // §15.1
	ackActions       = []string{"paused", "stopped", "acknowledged", "ignored"}                                                                                                                                                                      // §15.2
	mergeStrategies  = []string{"replace", "append", "interleave", "manual"}                                                                                                                                                                         // §16.3
	errorCodes       = []string{"INVALID_MESSAGE", "UNAUTHORIZED", "SESSION_NOT_FOUND", "PARTICIPANT_NOT_FOUND", "GATE_FAILED", "TIMEOUT", "RATE_LIMITED", "CONTEXT_TOO_LARGE", "INVALID_STATE", "TRANSPORT_ERROR", "AGENT_ERROR", "INTERNAL_ERROR"} // §17
)

func oneOf(s string, set []string) bool {
	for _, e := range set {
		if e == s {
			return true
		}
	}
	return false
}
