package mailin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestServePVPGatesAndInterrupts plays the PVP spec's Appendix A session
// setup (alice creates, claude joins as driver) with two approvers, then
// checks through SMTP ingest and the store:
//
//   - §14.3: a gate with the session's default quorum ({"type":"any",
//     "count":1}) resolves on its first approval; a later vote is refused
//     (invalid_field: the gate is not open), as is a vote on a gate never
//     requested; a rejection resolves an any:2 gate at once; an any:2
//     gate stays open on its first approval, resolves on its second, and
//     a third vote is refused (invalid_field);
//   - §15.2: a stop interrupt acknowledged as "ignored" is refused
//     (invalid_field); a pause interrupt may be ignored with a reason.
func TestServePVPGatesAndInterrupts(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	read := func(name string) []byte { return readEML(t, "../testdata/protocols/pvp/"+name+".json") }
	const session = "ses_01HX7K9P4QZCVD3N8MYW6R5T2B"
	n := 0
	msg := func(sender, typ, id string, payload map[string]any) []byte {
		n++
		if id == "" {
			id = fmt.Sprintf("01HX7KGATE%016d", n)
		}
		b, err := json.Marshal(map[string]any{"v": 1, "id": id, "ts": "2026-01-30T20:05:00.000Z", "session": session,
			"sender": sender, "type": typ, "payload": payload})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	join := func(who string) []byte {
		return msg(who, "session.join", "", map[string]any{"participant": map[string]any{"id": who, "name": who,
			"type": "human", "roles": []string{"approver"}, "capabilities": []string{}, "transport": "websocket"},
			"supported_versions": []int{1}})
	}
	request := func(id string, count int) []byte {
		return msg("claude_01", "gate.request", id, map[string]any{"action_type": "tool", "action_ref": "01HX7KBS7TCGYH6UI1QZ9U8W5E",
			"quorum": map[string]any{"type": "any", "count": count}, "timeout_seconds": 300, "message": "run shell_execute?"})
	}
	vote := func(who, typ, gate string) []byte {
		p := map[string]any{"gate": gate, "approver": who}
		if typ == "gate.reject" {
			p = map[string]any{"gate": gate, "rejector": who, "reason": "too risky"}
		}
		return msg(who, typ, "", p)
	}
	raise := func(id, urgency string) []byte {
		return msg("alice_01", "interrupt.raise", id, map[string]any{"urgency": urgency, "message": urgency + " now"})
	}
	ack := func(interrupt, action string) []byte {
		p := map[string]any{"interrupt": interrupt, "by": "claude_01", "action_taken": action}
		if action == "ignored" {
			p["ignore_reason"] = "finishing the current edit"
		}
		return msg("claude_01", "interrupt.acknowledge", "", p)
	}
	steps := []struct {
		doc  []byte
		want string
	}{
		{read("spec-a1-session-create"), "accepted:"},
		{read("spec-a2-session-join"), "accepted:"},
		{join("bob_01"), "accepted:"},
		{join("carol_01"), "accepted:"},
		{request("01HX7KGATEG1", 1), "accepted:"},
		{vote("bob_01", "gate.approve", "01HX7KGATEG1"), "accepted:"},                   // quorum met: resolved
		{vote("carol_01", "gate.approve", "01HX7KGATEG1"), "quarantined:invalid_field"}, // late vote
		{vote("carol_01", "gate.approve", "01HX7KGATENONE"), "quarantined:invalid_field"},
		{request("01HX7KGATEG2", 2), "accepted:"},
		{vote("bob_01", "gate.reject", "01HX7KGATEG2"), "accepted:"},                    // rejected at once
		{vote("carol_01", "gate.approve", "01HX7KGATEG2"), "quarantined:invalid_field"}, // late vote
		{join("dave_01"), "accepted:"},
		{request("01HX7KGATEG3", 2), "accepted:"},
		{vote("bob_01", "gate.approve", "01HX7KGATEG3"), "accepted:"},                  // 1 of 2: open
		{vote("carol_01", "gate.approve", "01HX7KGATEG3"), "accepted:"},                // 2 of 2: resolved
		{vote("dave_01", "gate.approve", "01HX7KGATEG3"), "quarantined:invalid_field"}, // late third vote
		{raise("01HX7KINTSTOP", "stop"), "accepted:"},
		{raise("01HX7KINTPAUSE", "pause"), "accepted:"},
		{ack("01HX7KINTSTOP", "ignored"), "quarantined:invalid_field"},
		{ack("01HX7KINTPAUSE", "ignored"), "accepted:"},
		{ack("01HX7KINTSTOP", "stopped"), "accepted:"},
	}
	var mails [][]byte
	var want []string
	for i, s := range steps {
		mails = append(mails, withAttachment(100+i, "application/pvp+json", s.doc))
		want = append(want, s.want)
	}
	got := ingestSeq(t, ts, mails)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}
