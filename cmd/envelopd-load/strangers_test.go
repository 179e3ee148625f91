package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestStrangersProcess: the strangers command starts its clients on
// "start", each from its own loopback address, alternating no key and a
// wrong one, and on "stop" writes what they did as one JSON line.
func TestStrangersProcess(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ips := map[string]bool{}
	var keyed, keyless int
	seen := make(chan struct{}, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		ips[host] = true
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ek_") {
			keyed++
		} else {
			keyless++
		}
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		seen <- struct{}{}
	}))
	defer srv.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- runAPIAbuseStrangers(context.Background(), &env{args: []string{"--target", srv.URL, "--strangers", "3", "--stranger-rate", "200"},
			stdin: inR, stdout: outW, stderr: io.Discard})
	}()
	io.WriteString(inW, "start\n")
	for range 12 {
		<-seen
	}
	io.WriteString(inW, "stop\n")
	line, err := bufio.NewReader(outR).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	inW.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
	var c strangerCounts
	if err := json.Unmarshal(line, &c); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	// The server answered 12; answers still on their way when the stop
	// came are sent, not answered.
	if c.Sent < 12 || c.Requests == 0 || c.Requests > c.Sent || c.Status[401] != c.Requests {
		t.Errorf("counts %+v, want at least 12 sent, some answered, all 401", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ips) != 3 || !ips["127.0.1.3"] || !ips["127.0.1.5"] || keyed == 0 || keyless == 0 {
		t.Errorf("from %v, %d keyed and %d keyless; want 127.0.1.3 to 127.0.1.5, both kinds", ips, keyed, keyless)
	}
}
