package api_test

import (
	"strings"
	"testing"
)

// TestPodsAndOrganization: one pod holding every inbox, its inbox and
// thread routes, the one organisation; creating or deleting a pod is a
// 400, another pod a 404.
func TestPodsAndOrganization(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.createInbox("a", "shop.test")
	e.createInbox("b", "shop.test")
	var pods struct {
		Count int `json:"count"`
		Pods  []struct {
			PodID     string `json:"pod_id"`
			Name      string `json:"name"`
			CreatedAt string `json:"created_at"`
		} `json:"pods"`
	}
	if c := e.do(e.key, "GET", "/v0/pods", nil, &pods); c != 200 || pods.Count != 1 || pods.Pods[0].PodID != "envelopd" || pods.Pods[0].CreatedAt == "" {
		t.Fatalf("list pods: %d %+v", c, pods)
	}
	var inboxes struct {
		Count   int `json:"count"`
		Inboxes []struct {
			InboxID string `json:"inbox_id"`
			PodID   string `json:"pod_id"`
		} `json:"inboxes"`
	}
	if c := e.do(e.key, "GET", "/v0/pods/envelopd/inboxes", nil, &inboxes); c != 200 || inboxes.Count != 2 || inboxes.Inboxes[0].PodID != "envelopd" {
		t.Errorf("pod inboxes: %d %+v", c, inboxes)
	}
	if c := e.do(e.key, "GET", "/v0/pods/envelopd/inboxes/a@shop.test", nil, nil); c != 200 {
		t.Errorf("pod inbox get: %d", c)
	}
	if c := e.do(e.key, "GET", "/v0/pods/envelopd/threads", nil, nil); c != 200 {
		t.Errorf("pod threads: %d", c)
	}
	scoped := e.newKey([]string{"a@shop.test"})
	if e.do(scoped, "GET", "/v0/pods/envelopd/inboxes", nil, &inboxes); inboxes.Count != 1 || inboxes.Inboxes[0].InboxID != "a@shop.test" {
		t.Errorf("scoped pod inboxes: %+v", inboxes)
	}
	var org struct {
		OrganizationID string `json:"organization_id"`
		InboxCount     int    `json:"inbox_count"`
		DomainCount    int    `json:"domain_count"`
	}
	if c := e.do(e.key, "GET", "/v0/organizations", nil, &org); c != 200 || org.OrganizationID != "envelopd" || org.InboxCount != 2 || org.DomainCount < 1 {
		t.Errorf("organization: %d %+v", c, org)
	}
	for _, tc := range []struct {
		method, path string
		code         int
		name         string
	}{
		{"POST", "/v0/pods", 400, "ValidationError"},
		{"DELETE", "/v0/pods/envelopd", 400, "ValidationError"},
		{"DELETE", "/v0/pods/other", 404, "NotFoundError"},
		{"GET", "/v0/pods/other", 404, "NotFoundError"},
		{"GET", "/v0/pods/other/inboxes", 404, "NotFoundError"},
	} {
		var er struct {
			Name    string `json:"name"`
			Message string `json:"message"`
		}
		if c := e.do(e.key, tc.method, tc.path, `{"name":"second"}`, &er); c != tc.code || er.Name != tc.name || !strings.Contains(er.Message, "envelopd") {
			t.Errorf("%s %s: %d %+v", tc.method, tc.path, c, er)
		}
	}
}
