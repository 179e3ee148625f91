package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveMetrics starts serve with --metrics on a free port and the extra
// flags; it returns the SMTP address and a scrape of /metrics: the
// samples whose name starts with prefix.
func serveMetrics(t *testing.T, extra ...string) (addr string, scrape func(prefix string) map[string]float64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := l.Addr().String()
	l.Close()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	addr = startServe(t, db, append([]string{"--dkim-txt", os.DevNull, "--metrics", maddr}, extra...)...)
	return addr, func(prefix string) map[string]float64 {
		t.Helper()
		resp, err := http.Get("http://" + maddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			name, val, ok := strings.Cut(line, " ")
			if ok && strings.HasPrefix(name, prefix) {
				got[name], _ = strconv.ParseFloat(val, 64)
			}
		}
		return got
	}
}

// TestServeMetricsStoreCounters: /metrics exports the group-commit
// counters, and they count the ingested messages.
func TestServeMetricsStoreCounters(t *testing.T) {
	addr, scrape := serveMetrics(t)
	for _, f := range []string{"../../testdata/flows/replay/01-pay.eml", "../../testdata/flows/first-contact-unpaid/01-which.eml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		smtpSend(t, addr, "agent@client.test", "agent@server.test", b)
	}
	got := scrape("envelopd_store_")
	commits, writes := got["envelopd_store_commits_total"], got["envelopd_store_writes_total"]
	if writes < 2 || commits < 1 || commits > writes {
		t.Errorf("store counters: commits %v, writes %v; want at least the 2 ingests, 1 ≤ commits ≤ writes\n%v", commits, writes, got)
	}
}

// TestServeMetricsWorkerJobs: /metrics exports each worker's jobs by
// outcome (runner.Metrics): the exec hand-off of one stored message is
// claimed once and succeeds once.
func TestServeMetricsWorkerJobs(t *testing.T) {
	addr, scrape := serveMetrics(t, "--exec", "cat >/dev/null")
	b, err := os.ReadFile("../../testdata/flows/replay/01-pay.eml")
	if err != nil {
		t.Fatal(err)
	}
	smtpSend(t, addr, "agent@client.test", "agent@server.test", b)
	const claimed = `envelopd_worker_jobs_total{outcome="claimed",worker="handoff_exec"}`
	const succeeded = `envelopd_worker_jobs_total{outcome="succeeded",worker="handoff_exec"}`
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := scrape("envelopd_worker_jobs_total")
		if got[succeeded] == 1 {
			if got[claimed] != 1 {
				t.Errorf("hand-off claimed %v times, want 1\n%v", got[claimed], got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no succeeded exec hand-off in /metrics:\n%v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
