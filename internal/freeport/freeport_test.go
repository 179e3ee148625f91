package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopback(t *testing.T) {
	t.Parallel()
	p, err := Loopback()
	if err != nil {
		t.Fatal(err)
	}
	if p <= 0 || p > 65535 {
		t.Fatalf("port %d", p)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("the port is not free: %v", err)
	}
	l.Close()
}
