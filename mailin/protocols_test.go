package mailin

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols/aicp"
	"github.com/envelopd/envelopd/protocols/vacant"
)

// withAttachment wraps a JSON document in a valid Envelopay ORDER mail
// (unique Message-ID and id per call) as an attachment.
func withAttachment(n int, ctype string, doc []byte) []byte {
	return []byte(fmt.Sprintf("From: alice@agents.test\r\nTo: bob@agents.test\r\nSubject: ORDER | tunnel %d\r\n"+
		"Message-ID: <tunnel-%d@agents.test>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n"+
		"--b1\r\nContent-Type: text/plain\r\n\r\n"+
		`{"v":"0.2.0","type":"order","id":"ord_t%d","task":{"description":"carry a tunnelled message"}}`+"\r\n"+
		"--b1\r\nContent-Type: %s\r\nContent-Disposition: attachment; filename=msg.json\r\n\r\n%s\r\n--b1--\r\n",
		n, n, n, ctype, strings.ReplaceAll(string(doc), "\n", "\r\n")))
}

// ingestSeq sends each mail and returns the stored status and error codes.
func ingestSeq(t *testing.T, ts *testServer, mails [][]byte) []string {
	t.Helper()
	var got []string
	for i, m := range mails {
		if code, text, err := send(t, ts.addr, "alice@agents.test", []string{"bob@agents.test"}, m); code != 250 {
			t.Fatalf("mail %d: %d %s %v", i, code, text, err)
		}
	}
	for _, m := range ts.all(t) {
		got = append(got, m.Status+":"+codes(m.Errors))
	}
	return got
}

func TestServeVacantChain(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	to := strings.Repeat("ab", 32)
	t0 := time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	var wires [][]byte
	prev := ""
	for seq := int64(1); seq <= 3; seq++ {
		e := &vacant.Envelope{To: to, Seq: seq, Time: t0.Add(time.Duration(seq) * time.Minute), Prev: prev,
			Idem: fmt.Sprintf("idem-%d", seq), Payload: vacant.Message{Role: "ROLE_USER", Parts: []vacant.Part{{Type: "text", Text: "step"}}}}
		w, err := vacant.Sign(e, priv)
		if err != nil {
			t.Fatal(err)
		}
		signed, _ := vacant.SigningBytes(e)
		prev = vacant.Hash(signed)
		wires = append(wires, w)
	}
	fork := &vacant.Envelope{To: to, Seq: 4, Time: t0.Add(time.Hour), Prev: strings.Repeat("cd", 32),
		Payload: vacant.Message{Role: "ROLE_USER", Parts: []vacant.Part{{Type: "text", Text: "forked"}}}}
	forkWire, err := vacant.Sign(fork, priv)
	if err != nil {
		t.Fatal(err)
	}
	mails := [][]byte{
		withAttachment(1, "application/a2a+json", wires[0]),
		withAttachment(2, "application/a2a+json", wires[1]),
		withAttachment(3, "application/a2a+json", wires[2]),
		withAttachment(4, "application/a2a+json", wires[1]), // seq 2 again
		withAttachment(5, "application/a2a+json", forkWire), // seq 4, wrong prev
	}
	got := ingestSeq(t, ts, mails)
	want := []string{"accepted:", "accepted:", "accepted:", "duplicate:replay_detected", "quarantined:chain_fork"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v\nwant %v", got, want)
	}
	seq, hash, err := ts.store.ChainTip(context.Background(), vacant.Chain(hexPub(priv), to))
	if err != nil || seq != 3 || hash != prev {
		t.Errorf("chain tip %d %s %v, want 3 %s", seq, hash, err, prev)
	}
}

func hexPub(priv ed25519.PrivateKey) string {
	return fmt.Sprintf("%x", []byte(priv.Public().(ed25519.PublicKey)))
}

func TestServeVCPReplayAndConflict(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) { p.Handoff = []string{"agent"} })
	read := func(name string) []byte { return readEML(t, "../testdata/protocols/vcp/"+name+".json") }
	got := ingestSeq(t, ts, [][]byte{
		withAttachment(1, "application/vcp+json", read("spec-commerce-search")),
		withAttachment(2, "application/vcp+json", read("idem-retry")),    // same request re-sent: a replay
		withAttachment(3, "application/vcp+json", read("idem-conflict")), // same key, other request
	})
	want := []string{"accepted:", "duplicate:", "quarantined:idempotency_conflict"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v\nwant %v", got, want)
	}
	ds, _ := ts.store.ClaimDeliveries(context.Background(), "agent", time.Now(), time.Minute, 10)
	if len(ds) != 1 {
		t.Errorf("%d messages handed to the agent, want 1 (the replay is not handed twice)", len(ds))
	}
}

func TestServeAICPNonceReplayAndConsent(t *testing.T) {
	now := time.Unix(1735776000, 0)
	keys := map[string][]byte{}
	privs := map[string]ed25519.PrivateKey{}
	for _, h := range []string{"alice", "bob"} {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		keys[h], privs[h] = pub, priv
	}
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.Now = func() time.Time { return now }
		p.Keys = func(context.Context) map[string][]byte { return keys }
	})
	n := 0
	msg := func(from, to string, payload any) []byte {
		n++
		m := map[string]any{"v": "0.1", "id": fmt.Sprintf("msg_%d", n), "from": from, "to": to,
			"timestamp": now.Unix(), "nonce": fmt.Sprintf("nonce-%016d", n)}
		if s, ok := payload.(string); ok {
			m["body"] = s
		} else {
			m["payload"] = payload
		}
		doc, _ := json.Marshal(m)
		signed, err := aicp.Sign(doc, privs[from])
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	hello := msg("alice", "bob", "hello before consent")
	mails := [][]byte{
		withAttachment(1, "application/aicp+json", hello),
		withAttachment(2, "application/aicp+json", msg("alice", "bob", map[string]any{"type": "handshake", "data": map[string]any{"action": "request", "message": "connect?"}})),
		withAttachment(3, "application/aicp+json", msg("bob", "alice", map[string]any{"type": "handshake", "data": map[string]any{"action": "accept"}})),
		withAttachment(4, "application/aicp+json", msg("alice", "bob", "hello after consent")),
		withAttachment(5, "application/aicp+json", hello), // a held message resent: now consented, accepted
		withAttachment(6, "application/aicp+json", hello), // and replayed: its nonce is spent
		withAttachment(7, "application/aicp+json", msg("bob", "alice", "bob has no consent to write to alice")),
		withAttachment(8, "application/aicp+json", msg("bob", "alice", map[string]any{"type": "handshake", "data": map[string]any{"action": "block"}})),
		withAttachment(9, "application/aicp+json", msg("alice", "bob", "blocked")),
	}
	got := ingestSeq(t, ts, mails)
	want := []string{
		"quarantined:consent_required", "accepted:", "accepted:", "accepted:", "accepted:",
		"duplicate:replay_detected,replay_detected", "quarantined:consent_required", "accepted:",
		"quarantined:consent_blocked",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// TestServePVPRoles plays the PVP spec's Appendix A session (alice creates,
// claude joins as driver, alice prompts, claude proposes a tool, alice
// approves) and then checks §7.2: a message whose type the sender's roles
// do not permit is unauthorized, in that session only.
func TestServePVPRoles(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	read := func(name string) []byte { return readEML(t, "../testdata/protocols/pvp/"+name+".json") }
	var mails [][]byte
	for i, name := range []string{"spec-a1-session-create", "spec-a2-session-join", "spec-a3-prompt-submit",
		"spec-a4-tool-propose", "spec-a5-tool-approve"} {
		mails = append(mails, withAttachment(i+1, "application/pvp+json", read(name)))
	}
	// claude (a driver) may not approve; an unknown sender may not prompt;
	// alice may not prompt in a session she did not create.
	var approve, stranger, otherSession map[string]any
	json.Unmarshal(read("spec-a5-tool-approve"), &approve)
	approve["sender"], approve["id"] = "claude_01", "01HX7KZZZZZZZZZZZZZZZZZZZ1"
	json.Unmarshal(read("spec-a3-prompt-submit"), &stranger)
	stranger["sender"], stranger["id"] = "mallory_01", "01HX7KZZZZZZZZZZZZZZZZZZZ2"
	json.Unmarshal(read("spec-a3-prompt-submit"), &otherSession)
	otherSession["session"], otherSession["id"] = "ses_other", "01HX7KZZZZZZZZZZZZZZZZZZZ3"
	for i, m := range []map[string]any{approve, stranger, otherSession} {
		b, _ := json.Marshal(m)
		mails = append(mails, withAttachment(10+i, "application/pvp+json", b))
	}
	got := ingestSeq(t, ts, mails)
	want := []string{"accepted:", "accepted:", "accepted:", "accepted:", "accepted:",
		"quarantined:unauthorized", "quarantined:unauthorized", "quarantined:unauthorized"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// TestServeWithholdsSecretValues: PVP §20.3 — secret values MUST NOT be
// persisted. A mail whose PVP attachment carries one is kept (quarantined,
// with its errors) but without its body: the secret is nowhere in the store.
func TestServeWithholdsSecretValues(t *testing.T) {
	ts := startServer(t, SMTPConfig{}, nil)
	doc := `{"v":1,"id":"01HX7KSECRET0000000000000A","ts":"2026-01-30T20:00:00.000Z","session":"ses_1","sender":"alice_01",` +
		`"type":"secret.share","payload":{"key":"DB_URL","scope":["claude_01"],"value_ref":"vault://db","value":"hunter2-very-secret"}}`
	got := ingestSeq(t, ts, [][]byte{withAttachment(1, "application/pvp+json", []byte(doc))})
	if len(got) != 1 || got[0] != "quarantined:invalid_field" {
		t.Fatalf("got %v", got)
	}
	msgs, err := ts.store.Messages(context.Background(), store.Filter{WithRaw: true})
	if err != nil || len(msgs) != 1 {
		t.Fatal(err)
	}
	m := msgs[0]
	view, _ := message.View(&m)
	for what, b := range map[string][]byte{"raw": m.Raw, "result": m.Result, "view": view} {
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("the secret value is in the stored %s", what)
		}
	}
	if !strings.Contains(string(m.Raw), "X-Envelopd-Withheld: ") || !strings.Contains(string(m.Raw), "Subject: ORDER | tunnel 1") {
		t.Errorf("stored raw:\n%s", m.Raw)
	}
}
