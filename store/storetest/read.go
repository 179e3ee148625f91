package storetest

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

func testState(ctx context.Context, t *testing.T, s Rules) {
	if v, u, err := s.IMAPState(ctx, "none"); err != nil || v != 0 || u != 0 {
		t.Errorf("unknown IMAP key: %d %d %v, want 0 0 nil", v, u, err)
	}
	for _, st := range [][2]uint32{{1, 10}, {1, 11}, {4294967295, 4294967295}} {
		if err := s.SetIMAPState(ctx, "k", st[0], st[1]); err != nil {
			t.Fatal(err)
		}
		if v, u, err := s.IMAPState(ctx, "k"); err != nil || v != st[0] || u != st[1] {
			t.Errorf("IMAP state %d %d %v, want %v", v, u, err, st)
		}
	}
	if m, err := s.Keys(ctx, "aicp"); err != nil || len(m) != 0 {
		t.Errorf("no keys: %v %v", m, err)
	}
	for _, k := range [][3]string{{"aicp", "alice", "k1"}, {"aicp", "bob", "k2"}, {"aicp", "alice", "k3"}, {"vcp", "alice", "k4"}} {
		if err := s.PutKey(ctx, k[0], k[1], k[2]); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := s.Keys(ctx, "aicp"); err != nil || !maps.Equal(m, map[string]string{"alice": "k3", "bob": "k2"}) {
		t.Errorf("aicp keys %v %v", m, err)
	}
	if seq, h, err := s.ChainTip(ctx, "nothing"); err != nil || seq != 0 || h != store.ZeroHash {
		t.Errorf("empty chain tip %d %s %v", seq, h, err)
	}
}

func testRead(ctx context.Context, t *testing.T, s Rules) {
	if _, err := s.Message(ctx, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Message(1) on empty store: %v, want ErrNotFound", err)
	}
	if _, err := s.Thread(ctx, "nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Thread(nothing): %v, want ErrNotFound", err)
	}
	// WaitNew: times out on an empty store, wakes on a commit.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := s.WaitNew(short, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitNew on empty store: %v, want deadline exceeded", err)
	}
	cancel()
	woke := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		woke <- s.WaitNew(c, 0)
	}()
	a, err := s.Ingest(ctx, msg("a@a.test", "a@a.test", "wch_1", func(in *store.Incoming) {
		in.Type, in.Mailbox = "which", "mb1"
		in.Result = []byte(`{"x":1}`)
		in.DKIM = []byte(`[{"domain":"a.test","result":"pass"}]`)
		in.AuthResults = "mx.test; dkim=pass"
		in.Warnings = append(in.Warnings, pr("invalid_field"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Errorf("WaitNew: %v", err)
	}
	b, _ := s.Ingest(ctx, msg("b@a.test", "a@a.test", "", func(in *store.Incoming) {
		in.InReplyTo = []string{"a@a.test"}
		in.Mailbox = "mb1"
	}))
	c, _ := s.Ingest(ctx, msg("c@c.test", "c@c.test", "ord_1", func(in *store.Incoming) {
		in.Type = "order"
		in.Errors = append(in.Errors, pr("missing_field"))
		in.Status = store.StatusQuarantined
	}))

	m, err := s.Message(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Message{ID: a.ID, Mailbox: "mb1", Direction: "in", MessageID: "a@a.test", Sender: "a@a.test",
		Recipients: []string{"agent@here.test"}, Subject: "PAY | wch_1", Type: "which", EnvelopayID: "wch_1",
		Status: "accepted", ThreadID: a.ThreadID, ReceivedAt: base, AuthResults: "mx.test; dkim=pass",
		Size: len("Message-ID: <a@a.test>\r\nFrom: a@a.test\r\n\r\nwch_1\r\n")}
	if m.ID != want.ID || m.Mailbox != want.Mailbox || m.Direction != want.Direction || m.MessageID != want.MessageID ||
		m.Sender != want.Sender || len(m.Recipients) != 1 || m.Recipients[0] != want.Recipients[0] ||
		m.Subject != want.Subject || m.Type != want.Type || m.EnvelopayID != want.EnvelopayID || m.Status != want.Status ||
		m.ThreadID != want.ThreadID || !m.ReceivedAt.Equal(want.ReceivedAt) || m.AuthResults != want.AuthResults ||
		m.Size != want.Size || string(m.Raw) != "Message-ID: <a@a.test>\r\nFrom: a@a.test\r\n\r\nwch_1\r\n" ||
		string(m.Result) != `{"x":1}` || string(m.DKIM) != `[{"domain":"a.test","result":"pass"}]` ||
		len(m.Errors) != 0 || len(m.Warnings) != 1 || m.Warnings[0].Code != "invalid_field" {
		t.Errorf("Message:\n got %+v\nwant %+v", m, want)
	}

	for _, c2 := range []struct {
		name string
		f    store.Filter
		want []int64
	}{
		{"all", store.Filter{}, []int64{a.ID, b.ID, c.ID}},
		{"cursor", store.Filter{AfterID: a.ID}, []int64{b.ID, c.ID}},
		{"limit", store.Filter{Limit: 2}, []int64{a.ID, b.ID}},
		{"cursor and limit", store.Filter{AfterID: a.ID, Limit: 1}, []int64{b.ID}},
		{"mailbox", store.Filter{Mailbox: "mb1"}, []int64{a.ID, b.ID}},
		{"type", store.Filter{Type: "order"}, []int64{c.ID}},
		{"status", store.Filter{Status: store.StatusQuarantined}, []int64{c.ID}},
		{"thread", store.Filter{ThreadID: a.ThreadID}, []int64{a.ID, b.ID}},
		{"nothing", store.Filter{Type: "offer"}, nil},
	} {
		ms, err := s.Messages(ctx, c2.f)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, m := range ms {
			got = append(got, m.ID)
			if m.Raw != nil {
				t.Errorf("%s: raw without WithRaw", c2.name)
			}
		}
		if !equalIDs(got, c2.want) {
			t.Errorf("Messages %s: %v, want %v", c2.name, got, c2.want)
		}
	}
	ms, err := s.Messages(ctx, store.Filter{WithRaw: true, Limit: 1})
	if err != nil || len(ms) != 1 || len(ms[0].Raw) != ms[0].Size {
		t.Errorf("WithRaw: %v %v", ms, err)
	}
	for _, ref := range []string{a.ThreadID, "a@a.test", "<b@a.test>", "wch_1"} {
		th, err := s.Thread(ctx, ref)
		if err != nil {
			t.Fatalf("Thread(%s): %v", ref, err)
		}
		if len(th) != 2 || th[0].ID != a.ID || th[1].ID != b.ID {
			t.Errorf("Thread(%s): %d messages", ref, len(th))
		}
	}
	if err := s.WaitNew(ctx, b.ID); err != nil {
		t.Errorf("WaitNew(after %d) with %d stored: %v", b.ID, c.ID, err)
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func testBadInput(ctx context.Context, t *testing.T, s Rules) {
	for _, c := range []struct {
		name string
		in   *store.Incoming
	}{
		{"nil", nil},
		{"direction", msg("x@x.test", "x@x.test", "", func(in *store.Incoming) { in.Direction = "sideways" })},
		{"status", msg("x@x.test", "x@x.test", "", func(in *store.Incoming) { in.Status = "maybe" })},
	} {
		if _, err := s.Ingest(ctx, c.in); !errors.Is(err, store.ErrBadInput) {
			t.Errorf("Ingest %s: %v, want ErrBadInput", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		out  *store.Outgoing
	}{
		{"nil", nil},
		{"no recipients", &store.Outgoing{Raw: []byte("x")}},
		{"empty recipient", &store.Outgoing{Raw: []byte("x"), Recipients: []string{""}}},
	} {
		if _, err := s.Enqueue(ctx, c.out); !errors.Is(err, store.ErrBadInput) {
			t.Errorf("Enqueue %s: %v, want ErrBadInput", c.name, err)
		}
	}
	if err := s.RecordDelivery(ctx, 1, "x", "lost", "", time.Now()); !errors.Is(err, store.ErrBadInput) {
		t.Errorf("RecordDelivery with unknown state: %v, want ErrBadInput", err)
	}
	// A panicking rule run inside the ingest transaction (a protocol's
	// tally) fails that message only, as an error.
	_, err := s.Ingest(ctx, msg("p@x.test", "x@x.test", "", func(in *store.Incoming) {
		in.Sets = []protocols.StateSet{{Kind: "k", Key: "a", Value: "v", If: &protocols.Tally{Kind: "k", Prefix: "a", Rule: panicRule{}}}}
	}))
	if err == nil {
		t.Errorf("Ingest with a panicking tally rule succeeded")
	}
	if ms, _ := s.Messages(ctx, store.Filter{}); len(ms) != 0 {
		t.Errorf("%d messages stored after the failed ingest, want 0", len(ms))
	}
	if _, err := s.Ingest(ctx, msg("ok@x.test", "x@x.test", "", nil)); err != nil {
		t.Errorf("Ingest after a failed one: %v", err)
	}
	// Keys too long to be keys (store.MaxKeyBytes) quarantine the mail
	// with invalid_field instead of failing its ingest; a Message-ID of
	// any length is stored, and the same mail again is a redelivery.
	long := strings.Repeat("x", 3000)
	huge := msg(long+"@x.test", "x@x.test", "pay_"+long, func(in *store.Incoming) {
		in.Claims = []protocols.Claim{{Kind: "k", Key: long, Value: "v"}}
	})
	out, err := s.Ingest(ctx, huge)
	if err != nil {
		t.Fatalf("Ingest with 3,000-byte keys: %v", err)
	}
	if out.Status != store.StatusQuarantined || !out.Errors.Has(protocols.CodeInvalidField) {
		t.Errorf("3,000-byte keys: %s %v, want quarantined with invalid_field", out.Status, codes(out.Errors))
	}
	if again, err := s.Ingest(ctx, huge); err != nil || !again.Redelivery || again.ID != out.ID {
		t.Errorf("the same mail with a 3,000-byte Message-ID again: %+v %v, want a redelivery of %d", again, err, out.ID)
	}
	// Hostile bytes in the text fields (NUL, invalid UTF-8; a backend
	// whose text type holds neither may replace them) never keep a mail
	// out, and its raw bytes come back exactly.
	raw := []byte("Subject: a\x00b\xff\r\n\r\n\x00\xfe body\r\n")
	out, err = s.Ingest(ctx, msg("nul\x00\xff@x.test", "x\x00@x.test", "id\x00\xff", func(in *store.Incoming) {
		in.Subject, in.Raw, in.Recipients = "a\x00b\xff", raw, []string{"r\x00@x.test"}
		in.Claims = []protocols.Claim{{Kind: "k", Key: "a\x00\xffb", Value: "v\x00"}}
	}))
	if err != nil {
		t.Fatalf("Ingest with NUL and invalid UTF-8 in text fields: %v", err)
	}
	m, err := s.Message(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Raw, raw) || m.Status != store.StatusAccepted {
		t.Errorf("stored %q %s, want the raw bytes exactly, accepted", m.Raw, m.Status)
	}
	// The claim key is binary and kept exactly: the same claim again is a replay.
	again, err := s.Ingest(ctx, msg("nul2@x.test", "y@x.test", "", func(in *store.Incoming) {
		in.Claims = []protocols.Claim{{Kind: "k", Key: "a\x00\xffb", Value: "v\x00"}}
	}))
	if err != nil || !again.Replay {
		t.Errorf("the same binary claim again: %+v %v, want a replay", again, err)
	}
}

func pr(code protocols.Code) protocols.Problem {
	return protocols.New(code, "", "test %s", code)
}

// panicRule is a protocols.TallyRule that panics.
type panicRule struct{}

func (panicRule) Resolved(claims, states map[string]string) bool { panic("boom") }
