package mailin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/knottest"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

const arcData = "../senderauth/testdata/arc/"

// authZone starts an in-process DNS server with the sender-authentication
// test zone: SPF and DMARC records, and the DKIM/ARC keys of the dkimpy
// chains (senderauth/testdata/arc).
func authZone(t *testing.T) *authdns.Client {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	f, err := os.Open(arcData + "keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), " "); ok {
			s.TXT(name, value)
		}
	}
	for name, txt := range map[string]string{
		"spf.test":           "v=spf1 ip4:127.0.0.1 -all",
		"_dmarc.spf.test":    "v=DMARC1; p=reject",
		"nospf.test":         "v=spf1 -all",
		"_dmarc.nospf.test":  "v=DMARC1; p=reject",
		"quar.test":          "v=spf1 -all",
		"_dmarc.quar.test":   "v=DMARC1; p=quarantine",
		"tmp.test":           "v=spf1 -all",
		"_dmarc.origin.test": "v=DMARC1; p=reject",
		"list.test":          "v=spf1 ip4:127.0.0.1 -all",
	} {
		s.TXT(name, txt)
	}
	s.ServFail("_dmarc.tmp.test")
	c, err := authdns.New(authdns.Config{Server: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func authServer(t *testing.T, enforce bool, trust ...string) *testServer {
	t.Helper()
	r := authZone(t)
	return startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.Verifier = &dkim.Verifier{Resolver: r}
		p.Sender = &senderauth.Checker{Resolver: r, TrustedSealers: trust}
		p.DMARCEnforce = enforce
		p.AuthServID = "mx.test"
	})
}

func plainMail(from string) []byte {
	return []byte("From: " + from + "\r\nTo: agent@shop.test\r\nSubject: hello\r\nMessage-ID: <" + from + ">\r\n\r\nhi\r\n")
}

func onlyMessage(t *testing.T, ts *testServer) store.Message {
	t.Helper()
	msgs := ts.all(t)
	if len(msgs) != 1 {
		t.Fatalf("%d messages stored, want 1", len(msgs))
	}
	return msgs[0]
}

// TestSenderVerdictStoredAndShown: SPF runs on the SMTP transaction, DMARC
// passes through the aligned SPF domain, and the verdict is stored, shown
// in the message JSON (message.View) and in Authentication-Results.
func TestSenderVerdictStoredAndShown(t *testing.T) {
	t.Parallel()
	ts := authServer(t, false)
	if code, text, err := send(t, ts.addr, "bounce@spf.test", []string{"agent@shop.test"}, plainMail("a@spf.test")); code != 250 {
		t.Fatalf("%d %s %v", code, text, err)
	}
	m := onlyMessage(t, ts)
	v := senderauth.FromResult(m.Result)
	if v == nil || v.SPF.Result != "pass" || v.SPF.Domain != "spf.test" || v.SPF.HELO != "none" ||
		v.DMARC.Result != "pass" || v.DMARC.Policy != "reject" || v.DMARC.Aligned.SPF != "spf.test" ||
		v.ARC.Result != "none" || v.AuthenticatedAs != "spf.test" || v.AuthenticatedBy != "dmarc" {
		t.Fatalf("verdict %+v", v)
	}
	if !v.Authenticated("someone@SPF.test") || v.Authenticated("a@other.test") {
		t.Fatal("Authenticated disagrees with authenticated_as")
	}
	want := "mx.test; spf=pass smtp.helo=client.test smtp.mailfrom=spf.test; dkim=none; dmarc=pass header.from=spf.test policy.dmarc=reject; arc=none"
	if m.AuthResults != want {
		t.Fatalf("Authentication-Results\n got %s\nwant %s", m.AuthResults, want)
	}
	b, err := message.View(&m)
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]json.RawMessage
	json.Unmarshal(b, &view)
	for k, w := range map[string]string{"spf": `"pass"`, "authenticated_as": `"spf.test"`, "authenticated_by": `"dmarc"`} {
		if string(view[k]) != w {
			t.Errorf("view %s = %s, want %s", k, view[k], w)
		}
	}
	if _, ok := view["sender"]; ok || !bytes.Contains(view["dmarc"], []byte(`"result":"pass"`)) || !bytes.Contains(view["arc"], []byte(`"result":"none"`)) {
		t.Errorf("view: sender %s dmarc %s arc %s", view["sender"], view["dmarc"], view["arc"])
	}
}

// TestDMARCRecordedNotEnforced: by default a DMARC failure under p=reject
// is stored and recorded, not refused.
func TestDMARCRecordedNotEnforced(t *testing.T) {
	t.Parallel()
	ts := authServer(t, false)
	if code, text, _ := send(t, ts.addr, "x@nospf.test", []string{"agent@shop.test"}, plainMail("a@nospf.test")); code != 250 {
		t.Fatalf("%d %s", code, text)
	}
	v := senderauth.FromResult(onlyMessage(t, ts).Result)
	if v.SPF.Result != "fail" || v.DMARC.Result != "fail" || v.DMARC.Disposition != "reject" || v.AuthenticatedAs != "" {
		t.Fatalf("verdict %+v", v)
	}
}

// TestDMARCEnforce: --dmarc-enforce refuses p=reject failures with 550
// 5.7.1 (nothing stored), quarantines p=quarantine failures, answers 451
// when the policy cannot be fetched now, and lets a pass through.
func TestDMARCEnforce(t *testing.T) {
	t.Parallel()
	ts := authServer(t, true)
	code, text, _ := send(t, ts.addr, "x@nospf.test", []string{"agent@shop.test"}, plainMail("a@nospf.test"))
	if code != 550 || !strings.Contains(text, "DMARC policy") {
		t.Fatalf("p=reject failure: %d %s, want 550 5.7.1", code, text)
	}
	if code, text, _ := send(t, ts.addr, "x@tmp.test", []string{"agent@shop.test"}, plainMail("a@tmp.test")); code != 451 {
		t.Fatalf("DMARC temperror: %d %s, want 451", code, text)
	}
	if n := len(ts.all(t)); n != 0 {
		t.Fatalf("%d messages stored after refusals", n)
	}
	if code, text, _ := send(t, ts.addr, "x@quar.test", []string{"agent@shop.test"}, plainMail("a@quar.test")); code != 250 {
		t.Fatalf("p=quarantine failure: %d %s, want 250", code, text)
	}
	m := onlyMessage(t, ts)
	if m.Status != store.StatusQuarantined || !strings.HasSuffix(codes(m.Errors), string(CodeDMARCFailed)) {
		t.Fatalf("p=quarantine failure stored %s with %s", m.Status, codes(m.Errors))
	}
	if code, text, _ := send(t, ts.addr, "x@spf.test", []string{"agent@shop.test"}, plainMail("b@spf.test")); code != 250 {
		t.Fatalf("DMARC pass under enforcement: %d %s", code, text)
	}
}

// TestARCTrustedForwarder: a PAY whose DKIM signature a mailing list broke
// (it added a footer) and then ARC-sealed is authenticated as its From
// domain when the sealer is trusted — dkim_failed becomes a warning — and
// not when the sealer is untrusted or the seal forged.
func TestARCTrustedForwarder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file, trust, authAs, arc string
		dkimFailed               bool
	}{
		{"forwarded.eml", "list.test", "origin.test", "pass", false},
		{"two_hop.eml", "relay2.test", "origin.test", "pass", false},
		{"two_hop.eml", "list.test", "", "pass", true}, // the newest sealer must be the trusted one
		{"forwarded.eml", "other.test", "", "pass", true},
		{"untrusted.eml", "list.test", "", "pass", true},
		{"forged.eml", "list.test", "", "fail", true},
		{"broken.eml", "list.test", "", "fail", true},
		{"footer_no_arc.eml", "list.test", "", "none", true},
		{"signed.eml", "list.test", "origin.test", "none", false}, // not forwarded: DMARC passes itself
	} {
		t.Run(c.file+"_"+c.trust, func(t *testing.T) {
			t.Parallel()
			ts := authServer(t, false, c.trust)
			code, text, _ := send(t, ts.addr, "bounce@list.test", []string{"agent@shop.test"}, readEML(t, arcData+c.file))
			if code != 250 {
				t.Fatalf("%d %s", code, text)
			}
			m := onlyMessage(t, ts)
			v := senderauth.FromResult(m.Result)
			if v.AuthenticatedAs != c.authAs || v.ARC.Result != c.arc {
				t.Fatalf("authenticated_as %q arc %s (%s), want %q %s", v.AuthenticatedAs, v.ARC.Result, v.ARC.Reason, c.authAs, c.arc)
			}
			hasFailed := strings.Contains(codes(m.Errors), string(protocols.CodeDKIMFailed))
			if hasFailed != c.dkimFailed {
				t.Fatalf("errors %s, warnings %s", codes(m.Errors), codes(m.Warnings))
			}
			if v.AuthenticatedBy == "arc" && !strings.Contains(codes(m.Warnings), string(protocols.CodeDKIMFailed)) {
				t.Fatalf("the forgiven dkim_failed is not a warning: %s", codes(m.Warnings))
			}
		})
	}
}

// TestARCTrustedForwarderEnforced: under --dmarc-enforce (origin.test
// publishes p=reject) the trusted forwarder's mail is accepted, the same
// mail with a forged seal refused.
func TestARCTrustedForwarderEnforced(t *testing.T) {
	t.Parallel()
	ts := authServer(t, true, "list.test")
	if code, text, _ := send(t, ts.addr, "bounce@list.test", []string{"agent@shop.test"}, readEML(t, arcData+"forwarded.eml")); code != 250 {
		t.Fatalf("trusted forwarder: %d %s", code, text)
	}
	if code, text, _ := send(t, ts.addr, "bounce@list.test", []string{"agent@shop.test"}, readEML(t, arcData+"forged.eml")); code != 550 {
		t.Fatalf("forged seal: %d %s, want 550", code, text)
	}
}

// TestOOPSUsesSenderVerdict: the courtesy OOPS goes to a sender
// authenticated by DMARC alone (an aligned SPF pass, no DKIM), and not to
// one whose domain fails DMARC.
func TestOOPSUsesSenderVerdict(t *testing.T) {
	t.Parallel()
	r := authZone(t)
	rec := &oopsRecorder{}
	ts := startServer(t, SMTPConfig{}, func(p *Pipeline) {
		p.Verifier = &dkim.Verifier{Resolver: r}
		p.Sender = &senderauth.Checker{Resolver: r}
		p.OOPS, p.OOPSDomains = rec.compose, []string{"server.test"}
	})
	if code, text, _ := send(t, ts.addr, "b@spf.test", []string{"rcpt@server.test"}, unknownType("alice@spf.test", "o1@x")); code != 250 {
		t.Fatalf("%d %s", code, text)
	}
	if c, q := rec.take(), ts.queuedOOPS(t); len(c) != 1 || len(q) != 1 || q[0] != "alice@spf.test" {
		t.Fatalf("OOPS composed %v, queued to %v; want one to alice@spf.test", c, q)
	}
	if code, text, _ := send(t, ts.addr, "b@nospf.test", []string{"rcpt@server.test"}, unknownType("mallory@nospf.test", "o2@x")); code != 250 {
		t.Fatalf("%d %s", code, text)
	}
	msgs := ts.all(t)
	if m := msgs[len(msgs)-1]; m.Sender != "mallory@nospf.test" || m.OOPS == nil || m.OOPS.Sent || m.OOPS.Reason != store.OOPSSenderUnverified {
		t.Fatalf("last stored %s with decision %+v, want mallory's, suppressed", m.Sender, m.OOPS)
	}
	if c := rec.take(); len(c) != 0 {
		t.Fatalf("an OOPS was composed for mallory: %v", c)
	}
}

// TestSenderVerifiedWithoutVerdictUsesPSL: without sender checks the
// courtesy OOPS falls back to an aligned DKIM pass, aligned by the
// public-suffix list: evil.co.uk does not vouch for bank.co.uk, a sibling
// subdomain of one organization does.
func TestSenderVerifiedWithoutVerdictUsesPSL(t *testing.T) {
	t.Parallel()
	pass := func(d string) []dkim.Result { return []dkim.Result{{Domain: d, Result: dkim.Pass}} }
	for _, c := range []struct {
		d, from, want string
	}{
		{"evil.co.uk", "ceo@bank.co.uk", ""},
		{"mail.bank.co.uk", "ceo@bank.co.uk", "dkim"},
		{"a.example.com", "x@b.example.com", "dkim"},
		{"co.uk", "ceo@bank.co.uk", ""},
	} {
		if got := senderVerified(nil, pass(c.d), c.from, ""); got != c.want {
			t.Errorf("d=%s From %s: %q, want %q", c.d, c.from, got, c.want)
		}
	}
	v := &senderauth.Verdict{AuthenticatedAs: "bank.co.uk", AuthenticatedBy: "arc"}
	if got := senderVerified(v, nil, "ceo@bank.co.uk", ""); got != "arc" {
		t.Errorf("with a verdict: %q, want arc", got)
	}
	if got := senderVerified(&senderauth.Verdict{}, pass("bank.co.uk"), "ceo@bank.co.uk", ""); got != "" {
		t.Errorf("an unauthenticated verdict was overridden by DKIM: %q", got)
	}
}

// TestRelayLocalAuthorByDMARC: relay mode refuses mail From a local
// domain without proof; a DMARC pass (here an aligned SPF pass from a host
// the domain's SPF record authorizes) is proof, as the relay's own DKIM
// signature is.
func TestRelayLocalAuthorByDMARC(t *testing.T) {
	t.Parallel()
	r := authZone(t)
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{Store: st, Verifier: &dkim.Verifier{Resolver: r}, Sender: &senderauth.Checker{Resolver: r}}
	relay := &Relay{Domains: []string{"spf.test", "nospf.test"}, Pipeline: p, Store: st}
	addr := serveRelay(t, relay)
	for _, mb := range []string{"bob@spf.test", "bob@nospf.test"} {
		if _, err := st.EnsureMailbox(ctx, mb); err != nil {
			t.Fatal(err)
		}
	}
	if code, text, _ := send(t, addr, "a@spf.test", []string{"bob@spf.test"}, plainMail("alice@spf.test")); code != 250 {
		t.Fatalf("DMARC-passing local author: %d %s", code, text)
	}
	if code, text, _ := send(t, addr, "a@nospf.test", []string{"bob@nospf.test"}, plainMail("alice@nospf.test")); code != 550 {
		t.Fatalf("local author failing DMARC: %d %s, want 550", code, text)
	}
}

// TestRelayARCSeal: with ARCSealers the relay ARC-seals what it queues
// for other domains (after DKIM-signing it); the chain verifies against
// the relay's key table, and dkimpy's arc_verify passes it under
// ENVELOPD_INTEROP=1 (TestInteropRelayARCSeal).
func TestRelayARCSeal(t *testing.T) {
	t.Parallel()
	sealed, table, _ := relaySealed(t)
	got := senderauth.VerifyARC(context.Background(), senderauth.TXTTable{Table: table}, sealed)
	if got.Result != "pass" || len(got.Sealers) != 1 || got.Sealers[0] != "agents.test" {
		t.Fatalf("relay seal: %s %v (%s)\n%s", got.Result, got.Sealers, got.Reason, sealed)
	}
	if !bytes.Contains(sealed, []byte("ARC-Authentication-Results: i=1; mx.agents.test; auth=pass smtp.auth=alice@agents.test; dkim=pass header.d=agents.test")) {
		t.Fatalf("seal's ARC-Authentication-Results:\n%s", sealed)
	}
}

// relaySealed submits a mail from a local user to a remote address
// through a relay that signs and seals, and returns the queued bytes and
// the relay's key table.
func relaySealed(t *testing.T) ([]byte, *dkim.StaticResolver, []string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "relay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	table := dkim.NewStaticResolver()
	signers, err := LocalSigners(ctx, st, []string{"agents.test"}, table)
	if err != nil {
		t.Fatal(err)
	}
	sealers, err := LocalARCSigners(ctx, st, []string{"agents.test"}, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureMailbox(ctx, "alice@agents.test"); err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{Store: st}
	relay := &Relay{Domains: []string{"agents.test"}, Pipeline: p, Store: st, Signers: signers, ARCSealers: sealers,
		AuthServID: "mx.agents.test", Smarthost: true}
	msg := []byte("From: alice@agents.test\r\nTo: bob@far.test\r\nSubject: hello\r\nMessage-ID: <r1@agents.test>\r\n\r\nhi\r\n")
	if _, err := relay.Deliver(ctx, msg, Meta{Source: "smtp", MailFrom: "alice@agents.test", Rcpts: []string{"bob@far.test"}}, "alice@agents.test"); err != nil {
		t.Fatal(err)
	}
	due, err := st.ClaimDue(ctx, time.Now().Add(time.Hour), time.Minute, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("queued %d, %v", len(due), err)
	}
	var recs []string
	for _, ss := range []map[string][]dkim.Signer{signers, sealers} {
		for _, s := range ss["agents.test"] {
			rec, err := dkim.TXTRecord(s.Domain, s.Selector, s.Key.Public())
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
		}
	}
	return due[0].Raw, table, recs
}

// TestInteropRelayARCSeal: dkimpy's arc_verify passes the chain the relay
// sealed, with the relay's keys served by Knot.
func TestInteropRelayARCSeal(t *testing.T) {
	if !interop() {
		t.Skip("ENVELOPD_INTEROP=1 runs it against Knot and dkimpy")
	}
	sealed, _, recs := relaySealed(t)
	var zone []knottest.Record
	for _, rec := range recs {
		n, v, _ := strings.Cut(rec, " ")
		zone = append(zone, knottest.TXT(n, v))
	}
	addr := knottest.Start(t, zone)
	f := filepath.Join(t.TempDir(), "sealed.eml")
	if err := os.WriteFile(f, sealed, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/usr/bin/python3", "../senderauth/testdata/interop/arc_verify.py", addr, f).Output()
	if err != nil {
		t.Fatalf("dkimpy (Debian python3-dkim): %v", err)
	}
	var ref map[string]struct {
		CV      string   `json:"cv"`
		Sealers []string `json:"sealers"`
	}
	if err := json.Unmarshal(out, &ref); err != nil || ref[f].CV != "pass" || len(ref[f].Sealers) != 1 || ref[f].Sealers[0] != "agents.test" {
		t.Fatalf("dkimpy: %s (%v)", out, err)
	}
}
