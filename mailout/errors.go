package mailout

import (
	"errors"
	"fmt"

	"github.com/emersion/go-smtp"
)

// SendError is why a recipient was not accepted. Permanent failures (a 5xx
// reply, RFC 5321 section 4.2.1, or a local policy refusal) must not be
// retried; temporary ones (a 4xx reply, a network or TLS failure, a
// timeout) are retried with backoff.
//
// Use errors.As(err, &*SendError) to read it, or IsPermanent.
type SendError struct {
	// Stage is where it failed: connect, starttls, auth, mail, rcpt, data.
	Stage     string
	Permanent bool
	// Code is the SMTP reply code (0 when there was no reply) and
	// Enhanced the RFC 3463 status ("5.1.1"), when the server gave one.
	Code     int
	Enhanced string
	Err      error
}

func (e *SendError) Error() string {
	kind := "temporary"
	if e.Permanent {
		kind = "permanent"
	}
	return fmt.Sprintf("%s failure at %s: %v", kind, e.Stage, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is a permanent send failure.
func IsPermanent(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Permanent
}

// classify wraps err into a *SendError: SMTP 5xx and local policy refusals
// are permanent; 4xx, network errors, TLS failures and timeouts temporary.
func classify(stage string, err error) error {
	var already *SendError
	if errors.As(err, &already) {
		return err
	}
	se := &SendError{Stage: stage, Err: err}
	var reply *smtp.SMTPError
	var policy *policyError
	switch {
	case errors.As(err, &reply):
		se.Code = reply.Code
		se.Permanent = reply.Code/100 == 5
		if ec := reply.EnhancedCode; ec != smtp.NoEnhancedCode && ec != smtp.EnhancedCodeNotSet {
			se.Enhanced = fmt.Sprintf("%d.%d.%d", ec[0], ec[1], ec[2])
		}
	case errors.As(err, &policy):
		se.Permanent = true
	}
	// Everything else (network, TLS, timeouts, cancellation) is temporary.
	return se
}
