package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/authdns"
	"github.com/envelopd/envelopd/authdns/dnstest"
	"github.com/envelopd/envelopd/domain"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/store"
)

// newDomainEnv is an API whose domain service checks records on a
// loopback DNS server (dns) and signs with keys; MX host mx.example.net.
func newDomainEnv(t *testing.T, keys []domain.DKIMKey) (*env, *domain.Service, *dnstest.Server) {
	t.Helper()
	st := openStore(t)
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	res, _ := authdns.New(authdns.Config{Server: dns.Addr(), MaxEntries: -1, Timeout: 2 * time.Second})
	dsvc := &domain.Service{Store: st, Checker: domain.Checker{Resolver: res}, Hostname: "mx.example.net",
		Keys: func(ctx context.Context, d string) ([]domain.DKIMKey, error) { return keys, nil }}
	svc, err := api.NewService(api.Config{Store: st, Domains: []string{"agents.example.com"}, DomainService: dsvc,
		Mailer: func(string) *mailout.Mailer { return &mailout.Mailer{} }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.NewHandler(svc, api.HandlerOptions{}))
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, svc: svc}
	e.key = e.newKey(nil)
	return e, dsvc, dns
}

// TestDomainsAPI: create, get, list, verify, zone file and delete over
// the SDK's routes and wire names, and the domain.verified event.
func TestDomainsAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := []domain.DKIMKey{{Selector: "ed1", TXT: "v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}}
	e, dsvc, dns := newDomainEnv(t, keys)
	st, svc, srv := e.st, e.svc, e.srv

	var d api.DomainObject
	if c := e.do(e.key, "POST", "/v0/domains", map[string]any{"domain": "Agents.Example.com."}, &d); c != 200 {
		t.Fatalf("create: %d", c)
	}
	if d.DomainID != "agents.example.com" || d.Status != "NOT_STARTED" || len(d.Records) != 7 {
		t.Fatalf("created %+v", d)
	}
	if r := d.Records[0]; r.Type != "MX" || r.Name != "agents.example.com" || r.Value != "mx.example.net." || r.Priority != 10 || r.Status != "MISSING" {
		t.Errorf("MX record %+v", r)
	}
	if r := d.Records[2]; r.Name != "ed1._domainkey.agents.example.com" || r.Value != keys[0].TXT {
		t.Errorf("DKIM record %+v", r)
	}
	var apiErr api.Error
	for _, tc := range []struct {
		body map[string]any
		code int
		name string
	}{
		{map[string]any{"domain": "agents.example.com"}, 409, "AlreadyExistsError"},
		{map[string]any{"domain": "co.uk"}, 400, "ValidationError"},
		{map[string]any{"domain": "*.example.org"}, 400, "ValidationError"},
		{map[string]any{"domain": ""}, 400, "ValidationError"},
		{map[string]any{"domain": "b.example.org", "tracking_enabled": true}, 400, "ValidationError"},
		{map[string]any{"domain": "b.example.org", "feedback_enabled": true}, 400, "ValidationError"},
	} {
		apiErr = api.Error{}
		if c := e.do(e.key, "POST", "/v0/domains", tc.body, &apiErr); c != tc.code || apiErr.Name != tc.name {
			t.Errorf("create %v: %d %+v, want %d %s", tc.body, c, apiErr, tc.code, tc.name)
		}
	}
	scoped := e.newKey([]string{"a@agents.example.com"})
	if c := e.do(scoped, "GET", "/v0/domains", nil, nil); c != 403 {
		t.Errorf("scoped key: %d, want 403", c)
	}

	// Everything but DMARC published: verify, then PENDING.
	full, _ := dsvc.Get(ctx, "agents.example.com")
	dns.A("mx.example.net", "192.0.2.25")
	domain.Publish(dns, domain.Records(full.Name, full.Config), map[string]string{"dmarc": ""})
	if c := e.do(e.key, "POST", "/v0/domains/agents.example.com/verify", nil, nil); c != 204 {
		t.Fatalf("verify: %d", c)
	}
	e.do(e.key, "GET", "/v0/domains/agents.example.com", nil, &d)
	if d.Status != "PENDING" || d.Reason != "dns_records_missing" || d.Records[3].Status != "MISSING" || d.Records[0].Status != "VALID" {
		t.Errorf("after verify with DMARC missing: %+v", d)
	}
	dns.TXT("_dmarc.agents.example.com", "v=DMARC1; p=none; rua=mailto:dmarc-reports@agents.example.com")
	if c := e.do(e.key, "POST", "/v0/domains/agents.example.com/verify", nil, nil); c != 204 {
		t.Fatalf("verify: %d", c)
	}
	d = api.DomainObject{}
	e.do(e.key, "GET", "/v0/domains/agents.example.com", nil, &d)
	if d.Status != "VERIFIED" || d.Reason != "" {
		t.Errorf("after verify: %+v", d)
	}
	for _, r := range d.Records {
		if r.Status != "VALID" {
			t.Errorf("record %+v", r)
		}
	}
	// domain.verified in the event log, rendered as the SDK's
	// DomainVerifiedEvent.
	// On Postgres a reader sees events only below the oldest writing
	// transaction still running (the store's listings), so the event may
	// show a moment after the commit: wait for it (WaitEvents), bounded.
	var evs []store.Event
	for {
		var err error
		evs, err = st.Events(ctx, store.EventFilter{Types: []string{store.EventDomainVerified}})
		if err != nil || len(evs) != 0 {
			break
		}
		last, err := st.LastEventID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = st.WaitEvents(wctx, last)
		cancel()
		if err != nil {
			t.Fatalf("no domain.verified event: %v", err)
		}
	}
	if len(evs) != 1 {
		t.Fatalf("events %+v", evs)
	}
	o, err := svc.EventObject(ctx, evs[0])
	if err != nil || o.EventType != "domain.verified" || o.Domain == nil || o.Domain.DomainID != "agents.example.com" || o.Domain.Status != "VERIFIED" {
		t.Errorf("event object %+v %v", o, err)
	}

	var list api.ListDomainsResponse
	if c := e.do(e.key, "GET", "/v0/domains", nil, &list); c != 200 || list.Count != 1 || list.Domains[0].Domain != "agents.example.com" || list.Domains[0].Records != nil {
		t.Errorf("list: %d %+v", c, list)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v0/domains/agents.example.com/zone-file", nil)
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != domain.Zone(full.Name, full.Config) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/dns") {
		t.Errorf("zone file: %s %q", resp.Header.Get("Content-Type"), body)
	}
	if c := e.do(e.key, "DELETE", "/v0/domains/agents.example.com", nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	for _, p := range []string{"/v0/domains/agents.example.com", "/v0/domains/agents.example.com/zone-file"} {
		if c := e.do(e.key, "GET", p, nil, nil); c != 404 {
			t.Errorf("GET %s after delete: %d", p, c)
		}
	}
	if _, err := svc.EventObject(ctx, evs[0]); err == nil {
		t.Error("event of a deleted domain rendered")
	}
}

// TestDomainsAPIAbsent: without a domain service the routes answer 501.
func TestDomainsAPIAbsent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	if c := e.do(e.key, "GET", "/v0/domains", nil, nil); c != 501 {
		t.Errorf("list: %d, want 501", c)
	}
	if c := e.do(e.key, "PATCH", "/v0/domains/x.example", map[string]any{}, nil); c != 501 {
		t.Errorf("update: %d, want 501", c)
	}
}
