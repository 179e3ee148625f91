package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeOOPSWithoutSmarthost: serve with courtesy OOPS on and no
// --smtp-url warns at startup, and `queue` marks the OOPS it queues as
// waiting for a smarthost (no_smarthost), in JSON and in the table.
func TestServeOOPSWithoutSmarthost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "envelopd.db")
	k := newTestDKIM(t, "buyer.test") // an OOPS goes only to a verified sender, from a signing domain
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &lineWriter{wrote: make(chan struct{}, 1)}
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &env{args: append([]string{"serve", "--smtp", "127.0.0.1:0", "--db", db}, k.flags("worker.test")...), stdin: strings.NewReader(""),
			stdout: &lineWriter{wrote: make(chan struct{}, 1)}, stderr: logs, ready: func(a string) { addrc <- a }})
	}()
	var addr string
	select {
	case addr = <-addrc:
	case code := <-done:
		t.Fatalf("serve exited %d: %s", code, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	if s := logs.String(); !strings.Contains(s, "no --smtp-url") || !strings.Contains(s, "never sent") {
		t.Errorf("startup log lacks the warning: %s", s)
	}
	smtpSend(t, addr, "alice@buyer.test", "bob@worker.test", k.sign(t, []byte("From: alice@buyer.test\r\nTo: bob@worker.test\r\n"+
		"Subject: REFUND | please\r\nMessage-ID: <refund-1@buyer.test>\r\n\r\nhello\r\n")))
	cancel()
	<-done

	code, out, errs := runCmd(t, "", "queue", "--json", "--db", db)
	var q struct {
		Kind        string `json:"kind"`
		NoSmarthost *bool  `json:"no_smarthost"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &q) != nil || q.Kind != "oops" || q.NoSmarthost == nil || !*q.NoSmarthost {
		t.Fatalf("queue --json: %d %q %q; want the OOPS with no_smarthost true", code, out, errs)
	}
	code, out, errs = runCmd(t, "", "queue", "--db", db)
	if code != 0 || !strings.Contains(out, "no_smarthost") || !strings.Contains(errs, "1 pending entry wait") {
		t.Errorf("queue: %d %q %q", code, out, errs)
	}

	// With a smarthost configured the flag is false (the worker sends).
	srv := startCapture(t)
	addr = startServe(t, db, "--smtp-url", "smtp://"+srv.Addr)
	_ = addr
	code, out, _ = runCmd(t, "", "queue", "--json", "--db", db)
	if code != 0 || strings.Contains(out, `"no_smarthost":true`) {
		t.Errorf("queue --json with a smarthost: %d %q", code, out)
	}
}
