package api_test

import (
	"strings"
	"testing"

	"github.com/envelopd/envelopd/api"
)

// TestPodDomains: the one pod's domains are the organisation's
// (pods.domains: create, list, get, verify, zone file, delete); another
// pod is a 404, a scoped key a 403, and update a 501 naming why.
func TestPodDomains(t *testing.T) {
	t.Parallel()
	e, _, _ := newDomainEnv(t, nil)
	pre := "/v0/pods/envelopd/domains"
	var d api.DomainObject
	if c := e.do(e.key, "POST", pre, map[string]any{"domain": "Pod.Example.com"}, &d); c != 200 || d.DomainID != "pod.example.com" || d.Status != "NOT_STARTED" {
		t.Fatalf("create: %d %+v", c, d)
	}
	var l api.ListDomainsResponse
	if c := e.do(e.key, "GET", "/v0/domains", nil, &l); c != 200 || l.Count != 1 || l.Domains[0].DomainID != "pod.example.com" {
		t.Errorf("organisation's list: %d %+v", c, l)
	}
	l = api.ListDomainsResponse{}
	if c := e.do(e.key, "GET", pre, nil, &l); c != 200 || l.Count != 1 || l.Domains[0].DomainID != "pod.example.com" {
		t.Errorf("pod's list: %d %+v", c, l)
	}
	d = api.DomainObject{}
	if c := e.do(e.key, "GET", pre+"/pod.example.com", nil, &d); c != 200 || d.DomainID != "pod.example.com" || len(d.Records) == 0 {
		t.Errorf("get: %d %+v", c, d)
	}
	if c := e.do(e.key, "POST", pre+"/pod.example.com/verify", nil, nil); c != 204 {
		t.Errorf("verify: %d", c)
	}
	if c := e.do(e.key, "GET", pre+"/pod.example.com/zone-file", nil, nil); c != 200 {
		t.Errorf("zone file: %d", c)
	}
	var er struct{ Name, Message string }
	if c := e.do(e.key, "GET", "/v0/pods/other/domains", nil, &er); c != 404 || er.Name != "NotFoundError" {
		t.Errorf("another pod: %d %+v", c, er)
	}
	if c := e.do(e.key, "PATCH", pre+"/pod.example.com", map[string]any{"feedback_enabled": true}, &er); c != 501 || !strings.Contains(er.Message, "feedback, subdomains, tracking") {
		t.Errorf("update: %d %+v", c, er)
	}
	if c := e.do(e.newKey([]string{"a@agents.example.com"}), "GET", pre, nil, nil); c != 403 {
		t.Errorf("scoped key: %d", c)
	}
	if c := e.do(e.key, "DELETE", pre+"/pod.example.com", nil, nil); c != 204 {
		t.Errorf("delete: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/domains/pod.example.com", nil, nil); c != 404 {
		t.Errorf("after delete: %d", c)
	}
}
