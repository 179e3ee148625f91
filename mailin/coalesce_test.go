package mailin

import (
	"net"
	"sync"
	"testing"

	"github.com/envelopd/envelopd/connlimit"
)

// recConn records each Write that reaches the socket.
type recConn struct {
	net.Conn
	mu     sync.Mutex
	writes []string
}

func (c *recConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, string(b))
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recConn) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

type recListener struct {
	net.Listener
	conns chan *recConn
}

func (l *recListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c}
	l.conns <- rc
	return rc, nil
}

// TestRepliesCoalesced: replies are held until the server reads again
// (RFC 2920 §3.2), then written together; a reply that ends the
// connection (CloseAfterWrite) and Close send what is held at once.
func TestRepliesCoalesced(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &recListener{Listener: ln, conns: make(chan *recConn, 4)}
	cl := &connlimit.Listener{Listener: rl}
	defer cl.Close()
	accept := func() (*smtpConn, *recConn, net.Conn) {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		c, err := cl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return &smtpConn{Conn: c.(*connlimit.Conn)}, <-rl.conns, client
	}

	sc, raw, client := accept()
	for _, r := range []string{"250 2.0.0 Roger\r\n", "250 2.0.0 I'll make sure\r\n", "354 Go ahead\r\n"} {
		if n, err := sc.Write([]byte(r)); err != nil || n != len(r) {
			t.Fatalf("write: %d %v", n, err)
		}
	}
	if w := raw.got(); len(w) != 0 {
		t.Fatalf("written before the next read: %q", w)
	}
	if _, err := client.Write([]byte("DATA\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	want := "250 2.0.0 Roger\r\n250 2.0.0 I'll make sure\r\n354 Go ahead\r\n"
	if w := raw.got(); len(w) != 1 || w[0] != want {
		t.Fatalf("writes %q, want one %q", w, want)
	}
	buf := make([]byte, len(want))
	if _, err := readFull(client, buf); err != nil || string(buf) != want {
		t.Fatalf("client read %q %v", buf, err)
	}
	sc.Write([]byte("221 2.0.0 Bye\r\n"))
	sc.Close()
	if w := raw.got(); len(w) != 2 || w[1] != "221 2.0.0 Bye\r\n" {
		t.Fatalf("writes after Close %q", w)
	}

	sc, raw, _ = accept()
	sc.Conn.CloseAfterWrite()
	sc.Write([]byte("421 4.7.0 Too many failures\r\n"))
	if w := raw.got(); len(w) != 1 || w[0] != "421 4.7.0 Too many failures\r\n" {
		t.Fatalf("final reply: writes %q, want it at once", w)
	}
	if _, err := sc.Write([]byte("x")); err == nil {
		t.Fatal("write after the connection closed: no error")
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
