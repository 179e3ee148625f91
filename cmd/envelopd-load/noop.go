package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/emersion/go-smtp"
)

// Limits shared by the no-op server and envelopd serve's defaults
// (mailin.SMTPConfig), so the baseline does the same protocol work.
const (
	noopMaxMessageBytes = 25 << 20
	noopMaxRecipients   = 100
	noopMaxLineLength   = 2000
	noopReadTimeout     = 5 * time.Minute
	noopWriteTimeout    = time.Minute
)

// NewNoopServer is the baseline: a go-smtp server whose DATA reads the
// message to the end and discards it (nothing parsed, nothing stored), with
// envelopd's limits. An oversized DATA gets go-smtp's 552.
func NewNoopServer() *smtp.Server {
	s := smtp.NewServer(noopBackend{})
	s.Domain = "localhost"
	s.MaxMessageBytes = noopMaxMessageBytes
	s.MaxRecipients = noopMaxRecipients
	s.MaxLineLength = noopMaxLineLength
	s.ReadTimeout = noopReadTimeout
	s.WriteTimeout = noopWriteTimeout
	s.EnableSMTPUTF8 = true
	return s
}

type noopBackend struct{}

func (noopBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return noopSession{}, nil }

type noopSession struct{}

func (noopSession) Mail(string, *smtp.MailOptions) error { return nil }
func (noopSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (noopSession) Reset()                               {}
func (noopSession) Logout() error                        { return nil }

// Data returns the reader's error, so that ErrDataTooLarge reaches the
// client as 552 (interop README, go-smtp pitfalls).
func (noopSession) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}

func runNoop(ctx context.Context, e *env) int {
	fs := newFlags(e, "noop")
	addr := fs.String("addr", "127.0.0.1:2526", "listen address")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load noop: %v\n", err)
		return 2
	}
	srv := NewNoopServer()
	fmt.Fprintf(e.stderr, "envelopd-load noop: listening on %s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && ctx.Err() == nil {
		fmt.Fprintf(e.stderr, "envelopd-load noop: %v\n", err)
		return 1
	}
	return 0
}
