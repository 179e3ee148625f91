package domain

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/store"
)

// testConfig is a domain whose records are fixed (the DKIM TXT is an
// Ed25519 key's).
var testConfig = Config{
	Hostname: "mx.example.net",
	DKIM:     []DKIMKey{{Selector: "ed1", TXT: "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}},
	STSID:    "20261127T120000",
}

func TestZoneGolden(t *testing.T) {
	t.Parallel()
	c := testConfig
	// A 2048-bit RSA key's TXT is longer than one string of 255 bytes.
	c.DKIM = append(c.DKIM, DKIMKey{Selector: "rsa1", TXT: "v=DKIM1; k=rsa; p=" + strings.Repeat("A", 392)})
	got := Zone("agents.example.com", c)
	golden := filepath.Join("testdata", "agents.example.com.zone")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("zone:\n%s\nwant:\n%s", got, want)
	}
	if p := STSPolicy("agents.example.com", c); p != "version: STSv1\r\nmode: testing\r\nmx: mx.example.net\r\nmax_age: 604800\r\n" {
		t.Errorf("policy %q", p)
	}
}

// serve publishes the records of testConfig for d on a dnstest server,
// each changed by edit (kind → value; "" leaves the record out).
func serve(t *testing.T, d string, edit map[string]string) *dnstest.Server {
	t.Helper()
	s, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.A("mx.example.net", "192.0.2.25")
	s.A("other.example.net", "192.0.2.99")
	Publish(s, Records(d, testConfig), edit)
	s.TXT(d, "google-site-verification=abc") // another TXT at the apex
	return s
}

func resolver(t *testing.T, s *dnstest.Server) *authdns.Client {
	t.Helper()
	c, err := authdns.New(authdns.Config{Server: s.Addr(), MaxEntries: -1, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func states(rs []Result) map[string]string {
	m := map[string]string{}
	for _, r := range rs {
		m[r.Kind] = r.State
	}
	return m
}

func TestCheck(t *testing.T) {
	t.Parallel()
	const d = "agents.example.com"
	all := func(st string) map[string]string {
		return map[string]string{"mx": st, "spf": st, "dkim": st, "dmarc": st, "mta-sts": st, "mta-sts-host": st, "tls-rpt": st}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name string
		edit map[string]string
		want map[string]string
	}{
		{"right", nil, all(StateOK)},
		{"missing", map[string]string{"mx": "", "spf": "", "dkim": "", "dmarc": "", "mta-sts": "", "mta-sts-host": "", "tls-rpt": ""}, all(StateMissing)},
		{"wrong", map[string]string{
			"mx": "other.example.net", "spf": "v=spf1 -all", "dkim": "v=DKIM1; k=ed25519; p=AAAA",
			"dmarc": "v=DMARC1; p=reject; rua=mailto:x@elsewhere.test", "mta-sts": "v=STSv1; id=old",
			"mta-sts-host": "other.example.net", "tls-rpt": "v=TLSRPTv1; rua=mailto:x@elsewhere.test",
		}, all(StateDifferent)},
		// Same meaning, other spelling: tag order, spaces, extra tags, case.
		{"equivalent", map[string]string{
			"spf":   "V=SPF1   MX ~ALL",
			"dmarc": "v=DMARC1;rua=mailto:dmarc-reports@agents.example.com;p=none;pct=100",
			"dkim":  "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQH Og7hcvPapiMlrwIaaPcHURo=",
		}, all(StateOK)},
		{"mta-sts host by address", map[string]string{"mta-sts-host": "192.0.2.25"}, all(StateOK)},
		{"mta-sts host elsewhere", map[string]string{"mta-sts-host": "192.0.2.99"}, with(all(StateOK), "mta-sts-host", StateDifferent)},
		{"dkim key case matters", map[string]string{"dkim": "v=DKIM1; k=ed25519; p=11QYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}, with(all(StateOK), "dkim", StateDifferent)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := serve(t, d, tc.edit)
			rs, ok := Checker{Resolver: resolver(t, s)}.Check(context.Background(), Records(d, testConfig))
			if got := states(rs); !equalMaps(got, tc.want) {
				t.Errorf("states %v, want %v", got, tc.want)
			}
			if ok != (tc.name == "right" || tc.name == "equivalent" || tc.name == "mta-sts host by address") {
				t.Errorf("ok %v", ok)
			}
			for _, r := range rs {
				if r.State == StateDifferent && (r.Got == "" || r.Want == "" || r.Got == r.Want) {
					t.Errorf("%s: different must show both: %+v", r.Kind, r)
				}
				if r.State == StateMissing && r.Got != "" {
					t.Errorf("%s: missing with got %q", r.Kind, r.Got)
				}
			}
		})
	}
	t.Run("duplicates", func(t *testing.T) {
		t.Parallel()
		s := serve(t, d, nil)
		s.TXT(d, "v=spf1 a -all") // two SPF records: RFC 7208 §4.5 permerror
		s.MX(d, 20, "backup.example.org")
		rs, ok := Checker{Resolver: resolver(t, s)}.Check(context.Background(), Records(d, testConfig))
		if ok || states(rs)["spf"] != StateDifferent || states(rs)["mx"] != StateDifferent {
			t.Fatalf("%+v", rs)
		}
		if rs[0].Got != "10 mx.example.net. | 20 backup.example.org." {
			t.Errorf("mx got %q", rs[0].Got)
		}
	})
	t.Run("propagating", func(t *testing.T) {
		t.Parallel()
		// The resolver still answers the old data; the authoritative
		// server has the new.
		old := serve(t, d, map[string]string{"mx": "other.example.net", "dmarc": ""})
		auth := serve(t, d, nil)
		rs, ok := Checker{Resolver: resolver(t, old), Authoritative: resolver(t, auth)}.Check(context.Background(), Records(d, testConfig))
		if want := with(all(StateOK), "mx", StatePropagating, "dmarc", StatePropagating); ok || !equalMaps(states(rs), want) {
			t.Errorf("states %v, want %v", states(rs), want)
		}
	})
	t.Run("servfail", func(t *testing.T) {
		t.Parallel()
		s := serve(t, d, nil)
		s.ServFail("_dmarc." + d)
		rs, ok := Checker{Resolver: resolver(t, s)}.Check(context.Background(), Records(d, testConfig))
		if ok || states(rs)["dmarc"] != StateError || !strings.Contains(rs[3].Detail, "ServerFailure") {
			t.Errorf("%+v", rs[3])
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const d = "agents.example.com"
	wrong := serve(t, d, map[string]string{"spf": ""})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	svc := &Service{Store: st, Checker: Checker{Resolver: resolver(t, wrong)}, Now: func() time.Time { return now }}
	c := testConfig
	c.STSID = ""
	got, err := svc.Add(ctx, "Agents.Example.com.", c, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != d || got.Status != store.DomainPending || got.Config.STSID != "20261127T120000" || len(got.Records) != 7 || got.Records[0].State != StateUnchecked {
		t.Fatalf("added %+v", got)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		err  error
	}{
		{d, testConfig, ErrExists},
		{"*.example.org", testConfig, ErrWildcard},
		{"co.uk", testConfig, ErrPublicSuffix},
		{"b.example.org", Config{}, ErrNoHostname},
		{"b.example.org", Config{Hostname: "mx.example.net", SPF: "include:x"}, ErrInvalid},
		{"b.example.org", Config{Hostname: "mx.example.net", DMARCReport: "a;b@x.test"}, ErrInvalid},
		{"b.example.org", Config{Hostname: "mx.example.net", DMARCPolicy: "drop"}, ErrInvalid},
		{"b.example.org", Config{Hostname: "localhost"}, ErrInvalid},
	} {
		if _, err := svc.Add(ctx, tc.name, tc.cfg, ""); !errors.Is(err, tc.err) {
			t.Errorf("Add(%q, %+v): %v, want %v", tc.name, tc.cfg, err, tc.err)
		}
	}
	if _, err := svc.Get(ctx, "nope.example.org"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
	got, err = svc.Check(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.DomainPending || states(got.Records)["spf"] != StateMissing || got.CheckedAt == nil || got.VerifiedAt != nil {
		t.Errorf("checked (SPF missing): %+v", got)
	}
	evs, _ := st.Events(ctx, store.EventFilter{Types: []string{store.EventDomainVerified}})
	if len(evs) != 0 {
		t.Fatalf("events before verified: %+v", evs)
	}
	// The records published: the check verifies, once.
	svc.Checker.Resolver = resolver(t, serve(t, d, nil))
	for range 2 {
		if got, err = svc.Check(ctx, d); err != nil || got.Status != store.DomainVerified {
			t.Fatalf("check: %+v, %v", got, err)
		}
	}
	evs, _ = st.Events(ctx, store.EventFilter{Types: []string{store.EventDomainVerified}})
	if len(evs) != 1 || evs[0].Detail != d {
		t.Fatalf("domain.verified events %+v", evs)
	}
	// The stored check is what Get shows.
	again, _ := svc.Get(ctx, d)
	a, _ := json.Marshal(again.Records)
	b, _ := json.Marshal(got.Records)
	if string(a) != string(b) {
		t.Errorf("get %s, check %s", a, b)
	}
	zone, err := svc.Zone(ctx, d)
	if err != nil || !strings.Contains(zone, "agents.example.com.\t3600\tIN\tMX\t10 mx.example.net.\n") {
		t.Errorf("zone %q, %v", zone, err)
	}
	if err := svc.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := svc.Delete(ctx, d); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	// client_id: the same create twice gives the one domain.
	x, err := svc.Add(ctx, "c.example.org", testConfig, "cid")
	if err != nil {
		t.Fatal(err)
	}
	y, err := svc.Add(ctx, "c.example.org", testConfig, "cid")
	if err != nil || y.Name != x.Name || y.ClientID != "cid" {
		t.Errorf("retried create: %+v, %v", y, err)
	}
}
