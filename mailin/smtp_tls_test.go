package mailin

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

const (
	authUser = "agent@server.test"
	authPass = "correct horse battery staple"
)

// tlsAuthServer is a test server with STARTTLS and one password user,
// listening on addr ("127.0.0.1:0", or "0.0.0.0:0" for a non-loopback
// listener) and dialled through loopback; the client config trusts its
// self-signed certificate.
func tlsAuthServer(t *testing.T, addr string) (*testServer, string, *tls.Config) {
	t.Helper()
	cert, pool := testCert(t)
	ts := startServer(t, SMTPConfig{
		Addr:  addr,
		TLS:   &tls.Config{Certificates: []tls.Certificate{cert}},
		Users: map[string]string{authUser: authPass},
	}, nil)
	_, port, err := net.SplitHostPort(ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	return ts, net.JoinHostPort("127.0.0.1", port), &tls.Config{RootCAs: pool, ServerName: tlsTestHost}
}

// dialTLS opens a session, checks that EHLO advertises STARTTLS, upgrades
// with STARTTLS and checks that EHLO then offers AUTH PLAIN and LOGIN.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) *smtp.Client {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := smtp.NewClient(conn)
	t.Cleanup(func() { c.Close() })
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("EHLO does not advertise STARTTLS")
	}
	c.Close()
	if c, err = smtp.DialStartTLS(addr, cfg); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Hello("client.test"); err != nil { // EHLO again, over TLS
		t.Fatalf("EHLO after STARTTLS: %v", err)
	}
	if st, ok := c.TLSConnectionState(); !ok || !st.HandshakeComplete {
		t.Fatal("no TLS after STARTTLS")
	}
	ok, mechs := c.Extension("AUTH")
	if !ok || !strings.Contains(mechs, "PLAIN") || !strings.Contains(mechs, "LOGIN") {
		t.Fatalf("after STARTTLS, AUTH is %v %q; want PLAIN and LOGIN", ok, mechs)
	}
	return c
}

// TestSMTPSTARTTLSAuth: on a listener beyond loopback with password users,
// EHLO offers STARTTLS and no AUTH in clear text; after STARTTLS, AUTH
// PLAIN and AUTH LOGIN with the right password get 235 and the message is
// stored, a wrong password gets 535, and RCPT without AUTH is refused.
func TestSMTPSTARTTLSAuth(t *testing.T) {
	ts, addr, cfg := tlsAuthServer(t, "0.0.0.0:0")
	msg := readEML(t, oopsData+"plain.eml")

	// In clear text: STARTTLS offered, AUTH not (not loopback).
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Error("EHLO does not advertise STARTTLS")
	}
	if ok, mechs := c.Extension("AUTH"); ok {
		t.Errorf("AUTH %q offered before STARTTLS on a non-loopback listener", mechs)
	}
	if err := c.Auth(sasl.NewPlainClient("", authUser, authPass)); err == nil {
		t.Error("AUTH PLAIN in clear text accepted")
	}
	c.Close()

	for _, tc := range []struct {
		name string
		auth sasl.Client
	}{
		{"plain", sasl.NewPlainClient("", authUser, authPass)},
		{"login", sasl.NewLoginClient(authUser, authPass)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialTLS(t, addr, cfg)
			if err := c.Auth(tc.auth); err != nil {
				t.Fatalf("AUTH %s: %v, want 235", tc.name, err)
			}
			// A Message-ID per delivery: the same mail twice is stored once.
			m := strings.Replace(string(msg), "<plain@", "<plain-"+tc.name+"@", 1)
			if err := c.SendMail("alice@buyer.test", []string{"bob@elsewhere.test"}, strings.NewReader(m)); err != nil {
				t.Fatalf("authenticated delivery: %v", err)
			}
		})
	}
	if n := len(ts.all(t)); n != 2 {
		t.Errorf("%d messages stored after two authenticated deliveries, want 2", n)
	}

	for _, tc := range []struct {
		name string
		auth sasl.Client
	}{
		{"plain wrong password", sasl.NewPlainClient("", authUser, "wrong")},
		{"login wrong password", sasl.NewLoginClient(authUser, "wrong")},
		{"plain unknown user", sasl.NewPlainClient("", "nobody@server.test", authPass)},
		{"plain identity of another user", sasl.NewPlainClient("other@server.test", authUser, authPass)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialTLS(t, addr, cfg)
			if err := c.Auth(tc.auth); smtpCode(err) != 535 {
				t.Fatalf("AUTH: %v, want 535", err)
			}
			// Still unauthenticated: RCPT is refused.
			if err := c.Mail("alice@buyer.test", nil); err != nil {
				t.Fatal(err)
			}
			if err := c.Rcpt("bob@server.test", nil); err == nil {
				t.Fatal("RCPT accepted after a failed AUTH")
			}
		})
	}

	t.Run("no auth", func(t *testing.T) {
		c := dialTLS(t, addr, cfg)
		if err := c.Mail("alice@buyer.test", nil); err != nil {
			t.Fatal(err)
		}
		err := c.Rcpt("bob@server.test", nil)
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code != smtp.ErrAuthRequired.Code || se.EnhancedCode != smtp.ErrAuthRequired.EnhancedCode {
			t.Fatalf("RCPT without AUTH: %v, want %d %v", err, smtp.ErrAuthRequired.Code, smtp.ErrAuthRequired.EnhancedCode)
		}
	})
	if n := len(ts.all(t)); n != 2 {
		t.Errorf("%d messages stored, want still 2", n)
	}
}

// TestSMTPLoopbackAuthRequired: on loopback AUTH works without STARTTLS
// too, but users still make RCPT need it.
func TestSMTPLoopbackAuthRequired(t *testing.T) {
	ts, addr, _ := tlsAuthServer(t, "127.0.0.1:0")
	msg := readEML(t, oopsData+"plain.eml")
	if code, text, _ := send(t, addr, "alice@buyer.test", []string{"bob@server.test"}, msg); code != smtp.ErrAuthRequired.Code {
		t.Errorf("RCPT without AUTH: %d %q, want %d", code, text, smtp.ErrAuthRequired.Code)
	}
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Auth(sasl.NewLoginClient(authUser, authPass)); err != nil {
		t.Fatalf("AUTH LOGIN on loopback: %v", err)
	}
	if err := c.SendMail("alice@buyer.test", []string{"bob@server.test"}, strings.NewReader(string(msg))); err != nil {
		t.Fatal(err)
	}
	if n := len(ts.all(t)); n != 1 {
		t.Errorf("%d messages stored, want 1", n)
	}
}

// TestSMTPDroppedMidDataStoresNothing: a client that sends half a message
// after DATA and hangs up gets nothing stored; the server keeps working.
func TestSMTPDroppedMidDataStoresNothing(t *testing.T) {
	for _, tc := range []struct {
		name, tail string
	}{
		{"mid-line", "{\"v\":\"0.2.0\",\"ty"},
		{"after a line", "hello\r\n"},
		{"before the dot", "hello\r\n\r\n"},
		{"half the dot line", "hello\r\n."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, SMTPConfig{}, nil)
			conn, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			tp := textproto.NewConn(conn)
			expect := func(code int, cmd string) {
				t.Helper()
				if cmd != "" {
					if err := tp.PrintfLine("%s", cmd); err != nil {
						t.Fatal(err)
					}
				}
				if _, msg, err := tp.ReadResponse(code); err != nil {
					t.Fatalf("%q: %v %s", cmd, err, msg)
				}
			}
			expect(220, "")
			expect(250, "EHLO client.test")
			expect(250, "MAIL FROM:<alice@buyer.test>")
			expect(250, "RCPT TO:<bob@server.test>")
			expect(354, "DATA")
			w := bufio.NewWriter(conn)
			w.WriteString("From: alice@buyer.test\r\nTo: bob@server.test\r\nSubject: WHICH\r\nMessage-ID: <dropped@buyer.test>\r\n\r\n" + tc.tail)
			w.Flush()
			conn.Close()

			// Shutdown returns once every session has ended.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := ts.srv.Shutdown(ctx); err != nil {
				t.Fatalf("session did not end: %v", err)
			}
			if msgs := ts.all(t); len(msgs) != 0 {
				t.Fatalf("stored %d messages from a dropped DATA: %+v", len(msgs), msgs)
			}
		})
	}
}

// TestSMTPQUITAfterSTARTTLS: inside TLS, QUIT is answered 221 before the
// connection closes (crypto/tls's Close sets a write deadline of now after
// its close_notify; the held reply must be written before it).
func TestSMTPQUITAfterSTARTTLS(t *testing.T) {
	t.Parallel()
	_, addr, cfg := tlsAuthServer(t, "127.0.0.1:0")
	for i := range 20 {
		c, err := smtp.DialStartTLS(addr, cfg)
		if err != nil {
			t.Fatalf("STARTTLS: %v", err)
		}
		if err := c.Noop(); err != nil {
			t.Fatalf("NOOP: %v", err)
		}
		if err := c.Quit(); err != nil {
			t.Fatalf("round %d: QUIT inside TLS: %v (want 221)", i, err)
		}
	}
}
