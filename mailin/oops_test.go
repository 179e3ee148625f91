package mailin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// unknownType is a REFUND (unknown type) mail from from, CRLF.
func unknownType(from, mid string) []byte {
	return []byte("From: " + from + "\r\nTo: bob@worker.test\r\nSubject: REFUND | please\r\n" +
		"Date: Mon, 05 Jan 2026 10:00:00 +0000\r\nMessage-ID: <" + mid + ">\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nhello\r\n")
}

// suppressed checks that the last inbound message is quarantined with
// unknown_type, got no OOPS, and says why (decision and warning).
func suppressed(t *testing.T, ts *testServer, rec *oopsRecorder, reason string) {
	t.Helper()
	if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 0 {
		t.Errorf("OOPS composed %v, queued to %v; want none", c, q)
	}
	msgs := ts.all(t)
	m := msgs[len(msgs)-1]
	if m.Direction != store.DirIn || m.Status != store.StatusQuarantined || !m.Errors.Has(protocols.CodeUnknownType) {
		t.Fatalf("last stored %+v, want the quarantined mail", m)
	}
	if m.OOPS == nil || m.OOPS.Sent || m.OOPS.Reason != reason || !m.Warnings.Has(protocols.CodeOOPSSuppressed) {
		t.Errorf("stored decision %+v, warnings %v; want suppressed as %s with warning oops_suppressed", m.OOPS, m.Warnings, reason)
	}
}

// TestOOPSBackscatter reproduces measured backscatter: a
// forged From without DKIM, or with a failing signature, or signed by an
// unaligned domain, got a signed OOPS; now none, and the stored mail says
// why. The authenticated submission user is verified without DKIM.
func TestOOPSBackscatter(t *testing.T) {
	t.Run("forged From, no DKIM", func(t *testing.T) {
		ts, rec, _ := oopsServer(t)
		if code, text, err := send(t, ts.addr, "x@attacker.test", []string{"rcpt@server.test"}, unknownType("victim@buyer.test", "f1@x")); code != 250 {
			t.Fatalf("%d %s %v", code, text, err)
		}
		suppressed(t, ts, rec, store.OOPSSenderUnverified)
	})
	t.Run("failing DKIM", func(t *testing.T) {
		ts, rec, kit := oopsServer(t)
		signed := kit.sign(t, unknownType("victim@buyer.test", "f2@x"), "buyer.test")
		tampered := bytes.Replace(signed, []byte("hello"), []byte("hellO"), 1)
		if code, text, err := send(t, ts.addr, "x@attacker.test", []string{"rcpt@server.test"}, tampered); code != 250 {
			t.Fatalf("%d %s %v", code, text, err)
		}
		suppressed(t, ts, rec, store.OOPSSenderUnverified)
		if m := ts.all(t)[0]; !m.Errors.Has(protocols.CodeDKIMFailed) {
			t.Errorf("errors %v, want dkim_failed kept", m.Errors)
		}
	})
	t.Run("passing but unaligned DKIM", func(t *testing.T) {
		ts, rec, kit := oopsServer(t)
		signed := kit.sign(t, unknownType("victim@buyer.test", "f3@x"), "peer.test")
		if code, text, err := send(t, ts.addr, "x@peer.test", []string{"rcpt@server.test"}, signed); code != 250 {
			t.Fatalf("%d %s %v", code, text, err)
		}
		suppressed(t, ts, rec, store.OOPSSenderUnverified)
	})
	t.Run("authenticated submission user", func(t *testing.T) {
		rec := &oopsRecorder{}
		ts := startServer(t, SMTPConfig{Users: map[string]string{"alice@buyer.test": "pw"}}, func(p *Pipeline) {
			p.OOPS, p.OOPSDomains = rec.compose, []string{"server.test"}
		})
		for _, from := range []string{"alice@buyer.test", "mallory@buyer.test"} {
			c, err := dialAuth(t, ts.addr, "alice@buyer.test", "pw")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.SendMail(from, []string{"rcpt@server.test"}, bytes.NewReader(unknownType(from, "auth-"+from))); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 1 || len(q) != 1 || q[0] != "alice@buyer.test" {
			t.Errorf("OOPS composed %v, queued to %v; want one, to the authenticated alice only", c, q)
		}
		msgs := ts.all(t) // mallory's mail is the last stored
		if m := msgs[len(msgs)-1]; m.Sender != "mallory@buyer.test" || m.OOPS == nil || m.OOPS.Reason != store.OOPSSenderUnverified {
			t.Errorf("last stored %s with decision %+v, want mallory's, suppressed as %s", m.Sender, m.OOPS, store.OOPSSenderUnverified)
		}
	})
}

// TestOOPSFromSigningDomain: the OOPS is sent from the first RCPT only
// when it is at a signing domain; else from --oops-from or postmaster at
// a signing domain; with none, no OOPS (measured: it was sent from any
// RCPT's domain, signed with the operator's key).
func TestOOPSFromSigningDomain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		domains  []string
		oopsFrom string
		rcpt     string
		want     string // "" = none, no_signing_domain
	}{
		{"rcpt at a signing domain", []string{"other.test", "server.test"}, "", "rcpt@server.test", "rcpt@server.test"},
		{"arbitrary rcpt", []string{"envelopd.test"}, "", "bob@victim-bank.test", "postmaster@envelopd.test"},
		{"arbitrary rcpt, configured sender", []string{"envelopd.test"}, "oops@envelopd.test", "bob@victim-bank.test", "oops@envelopd.test"},
		{"no signing domain", nil, "", "rcpt@server.test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &oopsRecorder{}
			kit := newDKIMKit(t)
			ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
				p.OOPS, p.Verifier, p.OOPSDomains, p.OOPSFrom = rec.compose, kit.v, tc.domains, tc.oopsFrom
			})
			raw := kit.sign(t, unknownType("alice@buyer.test", "from@x"), "buyer.test")
			if code, text, err := send(t, ts.addr, "alice@buyer.test", []string{tc.rcpt}, raw); code != 250 {
				t.Fatalf("%d %s %v", code, text, err)
			}
			if tc.want == "" {
				suppressed(t, ts, rec, store.OOPSNoSigningDomain)
				return
			}
			q, err := ts.store.Queue(context.Background(), store.QueuePending)
			if err != nil {
				t.Fatal(err)
			}
			if len(q) != 1 || q[0].From != tc.want {
				t.Fatalf("queue %+v, want one OOPS from %s", q, tc.want)
			}
			msgs := ts.all(t)
			if oops := msgs[len(msgs)-1]; oops.Type != "oops" || oops.Sender != tc.want {
				t.Errorf("stored OOPS from %q, want %s", oops.Sender, tc.want)
			}
		})
	}
}

// TestOOPSHostileText: a failing signature's s= and d= (a URL, terminal
// escapes) and a hostile id reach neither the OOPS subject nor its body;
// the note is bounded (measured: the tags were copied into the subject).
func TestOOPSHostileText(t *testing.T) {
	ts, rec, kit := oopsServer(t)
	body := `{"id":"acc_` + strings.Repeat("\x1b[31m", 3) + `","amount":"1"}`
	raw := []byte("DKIM-Signature: v=1; a=rsa-sha256; d=evil\x1b[2J.example; s=http://evil.example/phish\x1b[31m;\r\n" +
		" h=from; bh=AAAA; b=AAAA\r\n" +
		"From: alice@buyer.test\r\nTo: bob@worker.test\r\nSubject: FULFILL | done\r\n" +
		"Date: Mon, 05 Jan 2026 10:00:00 +0000\r\nMessage-ID: <hostile\x1b[0m@x>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n")
	signed := kit.sign(t, raw, "buyer.test")
	if code, text, err := send(t, ts.addr, "alice@buyer.test", []string{"rcpt@server.test"}, signed); code != 250 {
		t.Fatalf("%d %s %v", code, text, err)
	}
	rec.take()
	q, err := ts.store.Queue(context.Background(), store.QueuePending)
	if err != nil || len(q) != 1 {
		t.Fatalf("queue %+v %v, want one OOPS", q, err)
	}
	msgs := ts.all(t)
	if !msgs[0].Errors.Has(protocols.CodeDKIMFailed) {
		t.Fatalf("errors %v, want dkim_failed among them", msgs[0].Errors)
	}
	oops, err := ts.store.Message(context.Background(), msgs[len(msgs)-1].ID)
	if err != nil || oops.Type != "oops" {
		t.Fatalf("last stored %+v %v, want the OOPS", oops, err)
	}
	for _, bad := range []string{"evil", "phish", "\x1b", "[31m", "[2J", "s=", "d="} {
		if bytes.Contains(oops.Raw, []byte(bad)) {
			t.Errorf("the OOPS holds %q:\n%s", bad, oops.Raw)
		}
	}
	if len(oops.Subject) > 300 {
		t.Errorf("OOPS subject of %d bytes", len(oops.Subject))
	}
}

// TestOOPSRateLimitAndMetric: the per-thread and per-recipient limits
// apply through the pipeline (the store counts; storetest pins restarts),
// and suppressed OOPS are counted by reason.
func TestOOPSRateLimitAndMetric(t *testing.T) {
	rec := &oopsRecorder{}
	kit := newDKIMKit(t)
	cm := &countMetrics{}
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.OOPS, p.Verifier, p.OOPSDomains = rec.compose, kit.v, []string{"server.test"}
		p.OOPSLimits = store.OOPSLimits{PerRecipientHour: 3}
		p.Metrics = cm
	})
	for i := range 6 {
		raw := kit.sign(t, unknownType("alice@buyer.test", fmt.Sprintf("r%d@x", i)), "buyer.test")
		if code, text, err := send(t, ts.addr, "alice@buyer.test", []string{"rcpt@server.test"}, raw); code != 250 {
			t.Fatalf("%d %s %v", code, text, err)
		}
	}
	if q := ts.queuedOOPS(t); len(q) != 3 {
		t.Errorf("%d OOPS queued, want 3 (the hourly limit)", len(q))
	}
	if _, sup := cm.counts(); sup[store.OOPSRateRecipient] != 3 {
		n := sup[store.OOPSRateRecipient]
		t.Errorf("envelopd_oops_suppressed_total{reason=%q} = %v, want 3", store.OOPSRateRecipient, n)
	}
}

// relayServer is a relay for agents.test on an SMTP port, with courtesy
// OOPS and the kit's DKIM keys.
func relayServer(t *testing.T) (*testServer, *Relay, *oopsRecorder, *dkimKit) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	kit := newDKIMKit(t)
	rec := &oopsRecorder{}
	p := &Pipeline{Store: st, Verifier: kit.v, OOPS: rec.compose, OOPSDomains: []string{"agents.test"}}
	p.Store = settlingStore{st, p}
	r := &Relay{Domains: []string{"agents.test"}, Pipeline: p, Store: st}
	srv := startRelaySMTP(t, r)
	return &testServer{addr: srv.Addr().String(), store: st, srv: srv, p: p}, r, rec, kit
}

// startRelaySMTP serves r on 127.0.0.1:0 (the MX port of relay mode);
// the server and r's store close when the test ends.
func startRelaySMTP(t *testing.T, r *Relay) *SMTPServer {
	t.Helper()
	srv, err := NewSMTPServer(SMTPConfig{Addr: "127.0.0.1:0", Router: r}, r.Pipeline)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		srv.Close()
		r.Store.(io.Closer).Close()
	})
	return srv
}

// serveRelay is startRelaySMTP's address.
func serveRelay(t *testing.T, r *Relay) string { return startRelaySMTP(t, r).Addr().String() }

// TestRelayOOPSFanOut: one unauthenticated mail to 20 local recipients
// (measured: 20 signed OOPS queued, 20 mailboxes created) creates no
// mailbox (unknown ones are refused 550 5.1.1) and, to 20 existing
// mailboxes, queues at most one OOPS; the other copies say one_per_mail.
func TestRelayOOPSFanOut(t *testing.T) {
	ts, _, rec, kit := relayServer(t)
	ctx := context.Background()
	var rcpts []string
	for i := range 20 {
		rcpts = append(rcpts, fmt.Sprintf("agent%d@agents.test", i))
	}
	raw := kit.sign(t, unknownType("alice@buyer.test", "fan@x"), "buyer.test")
	if code, _, _ := send(t, ts.addr, "alice@buyer.test", rcpts, raw); code != 550 {
		t.Errorf("RCPT to an unknown local mailbox: %d, want 550", code)
	}
	if mbs, err := ts.store.ListMailboxes(ctx); err != nil || len(mbs) != 0 {
		t.Fatalf("mailboxes %+v %v, want none created by a stranger's mail", mbs, err)
	}
	for _, rc := range rcpts {
		if err := ts.store.SetMailboxPassword(ctx, rc, ""); err != nil {
			t.Fatal(err)
		}
	}
	if code, text, err := send(t, ts.addr, "alice@buyer.test", rcpts, raw); code != 250 {
		t.Fatalf("%d %s %v", code, text, err)
	}
	if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 1 || len(q) != 1 || q[0] != "alice@buyer.test" {
		t.Errorf("OOPS composed %v, queued to %v; want exactly one to alice@buyer.test", c, q)
	}
	n := 0
	for _, m := range ts.all(t) {
		if m.Direction == store.DirIn && m.OOPS != nil && m.OOPS.Reason == store.OOPSOnePerMail {
			n++
		}
	}
	if n != 19 {
		t.Errorf("%d copies record one_per_mail, want 19", n)
	}
	if mbs, _ := ts.store.ListMailboxes(ctx); len(mbs) != 20 {
		t.Errorf("%d mailboxes, want the 20 added", len(mbs))
	}
	// Unsigned, forged: stored in the 20 mailboxes, no OOPS at all.
	if code, text, err := send(t, ts.addr, "x@attacker.test", rcpts, unknownType("victim@buyer.test", "fan2@x")); code != 250 {
		t.Fatalf("%d %s %v", code, text, err)
	}
	if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 0 || len(q) != 1 {
		t.Errorf("forged mail: OOPS composed %v, queued to %v; want none new", c, q)
	}
}

// dialAuth connects to a loopback test server and logs in with AUTH PLAIN.
func dialAuth(t *testing.T, addr, user, pass string) (*smtp.Client, error) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		return nil, err
	}
	if err := c.Hello("client.test"); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Auth(sasl.NewPlainClient("", user, pass)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
