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

// TestServeMetricsStoreCounters: /metrics exports the group-commit
// counters, and they count the ingested messages.
func TestServeMetricsStoreCounters(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := l.Addr().String()
	l.Close()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	addr := startServe(t, db, "--dkim-txt", os.DevNull, "--metrics", maddr)
	for _, f := range []string{"../../testdata/flows/replay/01-pay.eml", "../../testdata/flows/first-contact-unpaid/01-which.eml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		smtpSend(t, addr, "agent@client.test", "agent@server.test", b)
	}
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
		if ok && strings.HasPrefix(name, "envelopd_store_") {
			got[name], _ = strconv.ParseFloat(val, 64)
		}
	}
	commits, writes := got["envelopd_store_commits_total"], got["envelopd_store_writes_total"]
	if writes < 2 || commits < 1 || commits > writes {
		t.Errorf("store counters: commits %v, writes %v; want at least the 2 ingests, 1 ≤ commits ≤ writes\n%v", commits, writes, got)
	}
}

// TestServeMetricsWorkerJobs: /metrics exports each worker's jobs by
// outcome (runner.Metrics): the exec hand-off of one stored message is
// claimed once and succeeds once.
func TestServeMetricsWorkerJobs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := l.Addr().String()
	l.Close()
	db := filepath.Join(t.TempDir(), "envelopd.db")
	addr := startServe(t, db, "--dkim-txt", os.DevNull, "--metrics", maddr, "--exec", "cat >/dev/null")
	b, err := os.ReadFile("../../testdata/flows/replay/01-pay.eml")
	if err != nil {
		t.Fatal(err)
	}
	smtpSend(t, addr, "agent@client.test", "agent@server.test", b)
	const claimed = `envelopd_worker_jobs_total{outcome="claimed",worker="handoff_exec"}`
	const succeeded = `envelopd_worker_jobs_total{outcome="succeeded",worker="handoff_exec"}`
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + maddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			name, val, ok := strings.Cut(line, " ")
			if ok && strings.HasPrefix(name, "envelopd_worker_jobs_total") {
				got[name], _ = strconv.ParseFloat(val, 64)
			}
		}
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
