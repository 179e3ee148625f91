package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/evmfake"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// arcPayDir holds the ARC-forwarded PAY and its DNS records, made by its
// gen.py with dkimpy (README.md there).
const arcPayDir = "../../senderauth/testdata/arcpay"

// arcPayCase is one ARC-forwarded PAY and what envelopd must make of it.
type arcPayCase struct {
	file   string
	authAs string // authenticated_as; "" is null
	arc    string // the ARC result
	status string // the message's status
	state  string // its payment's state
	reason string // its payment's reason, for a payment never checked
}

// arcPayCases: the PAY payer.test signed, whose footer forward.test
// changed (DKIM fails) and which forward.test sealed, is authenticated as
// payer.test by the trusted sealer and its payment verified. The same
// mail with a forged ARC set — the AMS and AS signed with a key
// forward.test does not publish, or the seal's cv changed — is not
// authenticated: its DKIM failure stays an error, the message is
// quarantined, and a quarantined message's payment is never checked on
// the chain (unverified).
var arcPayCases = []arcPayCase{
	{"forwarded.eml", "payer.test", senderauth.Pass, store.StatusAccepted, store.PaymentVerified, ""},
	{"forged.eml", "", senderauth.Fail, store.StatusQuarantined, store.PaymentUnverified, "the message is quarantined: its payment is not checked"},
	{"cv_tampered.eml", "", senderauth.Fail, store.StatusQuarantined, store.PaymentUnverified, "the message is quarantined: its payment is not checked"},
}

// readRecords reads DNS TXT records written "name TXT-value" per line
// (gen.py's records.txt and keys.txt).
func readRecords(t *testing.T, path string) [][2]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n, v, ok := strings.Cut(sc.Text(), " "); ok {
			recs = append(recs, [2]string{n, v})
		}
	}
	if err := sc.Err(); err != nil || len(recs) == 0 {
		t.Fatalf("%s: %d records, %v", path, len(recs), err)
	}
	return recs
}

// checkARCPay delivers the PAY in dir/c.file from 127.0.0.1 as
// bounce@forward.test (SPF pass for forward.test) into its own `envelopd
// serve --dns dns --arc-trust forward.test` with a rail (flags), and checks
// the stored message, its sender verdict and its payment; it returns the
// payment.
func checkARCPay(t *testing.T, dir, dns string, rail []string, c arcPayCase) *store.Payment {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, c.file))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "envelopd.db")
	addr := startServe(t, db, append([]string{"--dns", dns, "--arc-trust", "forward.test", "--hostname", "mx.shop.test"}, rail...)...)
	smtpSend(t, addr, "bounce@forward.test", "shop@shop.test", raw)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, msgs := storedPays(t, ctx, db, 1)
	m := msgs[0]
	v := senderauth.FromResult(m.Result)
	if v == nil {
		t.Fatalf("%s: no sender verdict stored: %s", c.file, m.Result)
	}
	if v.AuthenticatedAs != c.authAs || v.ARC.Result != c.arc || v.SPF.Result != senderauth.Pass || v.DMARC.Result != senderauth.Fail {
		t.Errorf("%s: authenticated_as %q by %q, arc %+v, spf %s, dmarc %s; want authenticated_as %q, arc %s, spf pass, dmarc fail",
			c.file, v.AuthenticatedAs, v.AuthenticatedBy, v.ARC, v.SPF.Result, v.DMARC.Result, c.authAs, c.arc)
	}
	if c.authAs != "" && (v.AuthenticatedBy != "arc" || v.ARC.TrustedSealer != "forward.test") {
		t.Errorf("%s: authenticated by %q, trusted sealer %q; want arc, forward.test", c.file, v.AuthenticatedBy, v.ARC.TrustedSealer)
	}
	// DKIM itself fails either way: the forwarder's footer broke it.
	if d := dkimResults(t, m.DKIM); len(d) != 1 || d[0].Domain != "payer.test" || d[0].Result != dkim.Fail {
		t.Errorf("%s: DKIM results %+v, want payer.test fail", c.file, d)
	}
	failed := m.Errors.Has(protocols.CodeDKIMFailed)
	if m.Status != c.status || failed != (c.authAs == "") {
		t.Errorf("%s: status %s, errors %v; want %s, dkim_failed an error only when not authenticated", c.file, m.Status, m.Errors, c.status)
	}
	if c.state == store.PaymentVerified {
		if m.Status != store.StatusAccepted {
			t.Fatalf("%s: %s: its payment is never checked", c.file, m.Status)
		}
		waitSettled(t, ctx, st, 1)
	}
	p, err := st.GetPayment(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != c.state || p.Authenticated != (c.authAs != "") || (c.reason != "" && p.Reason != c.reason) {
		t.Errorf("%s: payment %s (%s), authenticated %v; want %s (%s), authenticated %v",
			c.file, p.State, p.Reason, p.Authenticated, c.state, c.reason, c.authAs != "")
	}
	return p
}

// TestServeARCForwardedPay runs the ARC-forwarded PAY (arcPayCases)
// through `envelopd serve` with the in-process DNS server serving the
// keys, SPF and DMARC records, and an in-process EVM node answering for
// the PAY's transaction.
func TestServeARCForwardedPay(t *testing.T) {
	t.Parallel()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for _, r := range readRecords(t, filepath.Join(arcPayDir, "records.txt")) {
		s.TXT(r[0], r[1])
	}
	for _, c := range arcPayCases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			node := evmfake.Start(t, "usdc-transfer.json")
			p := checkARCPay(t, arcPayDir, s.Addr(), []string{"--rail", "base=" + node.URL,
				"--wallet", "base=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "--confirmations", "base=3"}, c)
			if c.state == store.PaymentVerified && p.Paid != "30000000" {
				t.Errorf("verified payment paid %q, want 30000000", p.Paid)
			}
		})
	}
}

// dkimResults decodes a stored message's DKIM results.
func dkimResults(t *testing.T, b []byte) []dkim.Result {
	t.Helper()
	var r []dkim.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("DKIM results %s: %v", b, err)
	}
	return r
}
