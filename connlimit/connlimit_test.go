package connlimit

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// TestListenerPerIP: past PerIP, a client gets the refusal line and is
// closed; closing an accepted connection frees its slot; another IP has
// its own count.
func TestListenerPerIP(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused []Reason
	l := &Listener{Listener: inner, Max: 10, PerIP: 2,
		Refuse:  func(r Reason) string { return "no: " + string(r) + "\r\n" },
		Refused: func(r Reason, _ string) { refused = append(refused, r) }}
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\r\n"))
			accepted <- c
		}
	}()
	dial := func(ip string) string {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	if a, b := dial("127.0.0.1"), dial("127.0.0.1"); a != "hello\r\n" || b != "hello\r\n" {
		t.Fatalf("first two: %q %q", a, b)
	}
	if got := dial("127.0.0.1"); got != "no: max_connections_per_ip\r\n" {
		t.Errorf("third from one IP: %q", got)
	}
	if got := dial("127.0.0.2"); got != "hello\r\n" {
		t.Errorf("another IP: %q", got)
	}
	first := <-accepted
	first.Close()
	first.Close() // a second Close must not free a second slot
	if got := dial("127.0.0.1"); got != "hello\r\n" {
		t.Errorf("after a close: %q", got)
	}
	if got := dial("127.0.0.1"); got != "no: max_connections_per_ip\r\n" {
		t.Errorf("double close freed two slots: %q", got)
	}
	if l.Active() != 3 {
		t.Errorf("Active() = %d, want 3", l.Active())
	}
	if len(refused) != 2 {
		t.Errorf("refusals reported: %v", refused)
	}
}
