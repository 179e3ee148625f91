package dkim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	msgdkim "github.com/emersion/go-msgauth/dkim"
)

// DefaultMaxSignatures is how many signatures a Verifier checks per message
// when MaxSignatures is zero (RFC 6376 section 6.1 lets verifiers limit it;
// each one costs a DNS lookup).
const DefaultMaxSignatures = 5

// ErrUnreadable is returned by Verify when the message cannot be read at all.
var ErrUnreadable = errors.New("dkim: unreadable message")

// Verifier verifies the DKIM signatures of received messages. The zero value
// uses real DNS (without cache); set Resolver to share a cache between
// messages or to work offline. A Verifier is safe for concurrent use if its
// Resolver is.
type Verifier struct {
	Resolver Resolver
	// MaxSignatures is how many signatures are verified per message, from
	// the top; the others are reported as neutral. Zero means 5.
	MaxSignatures int

	// readers reuses the buffered reader go-msgauth would allocate for
	// every message (it keeps a *bufio.Reader of its size as it is).
	readers sync.Pool
}

// Verify checks every DKIM-Signature field of raw, the message exactly as
// received (CRLF or LF line ends), and returns one Result per signature in
// header order (topmost first). A message without signatures gives an empty,
// non-nil slice. Failures are reported in the results; the error is non-nil
// only when the message cannot be read (ErrUnreadable).
func (v *Verifier) Verify(ctx context.Context, raw []byte) ([]Result, error) {
	fields, complete := headerFields(raw)
	var sigs []map[string]string
	for _, f := range fields {
		if strings.EqualFold(f.name, "DKIM-Signature") {
			sigs = append(sigs, tags(f.value))
		}
	}
	results := make([]Result, 0, len(sigs))
	if len(sigs) == 0 {
		return results, nil
	}
	if !complete {
		// A message with no body may lack the empty line; go-msgauth needs
		// it. Appending it changes neither canonical form.
		msg := make([]byte, 0, len(raw)+4)
		msg = append(msg, raw...)
		if !bytes.HasSuffix(msg, []byte("\n")) {
			msg = append(msg, "\r\n"...)
		}
		raw = append(msg, "\r\n"...)
	}

	max := v.MaxSignatures
	if max <= 0 {
		max = DefaultMaxSignatures
	}
	resolver := v.Resolver
	if resolver == nil {
		resolver = NewDNSResolver(10*time.Second, 0)
	}
	opts := &msgdkim.VerifyOptions{
		LookupTXT: func(name string) ([]string, error) {
			txts, err := resolver.LookupTXT(ctx, name)
			if err != nil {
				// go-msgauth tests err.(net.Error).Temporary() directly.
				return nil, classify(name, err)
			}
			return txts, nil
		},
		MaxVerifications: max,
	}
	br, _ := v.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReader(nil)
	}
	br.Reset(bytes.NewReader(raw))
	verifs, err := msgdkim.VerifyWithOptions(br, opts)
	br.Reset(nil)
	v.readers.Put(br)
	if err != nil && !errors.Is(err, msgdkim.ErrTooManySignatures) {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if want := min(len(sigs), max); len(verifs) != want {
		return nil, fmt.Errorf("%w: found %d signatures, go-msgauth verified %d", ErrUnreadable, want, len(verifs))
	}

	for i, t := range sigs {
		r := Result{Domain: t["d"], Selector: t["s"], Algorithm: t["a"]}
		switch {
		case i >= max:
			r.Result = Neutral
			r.Error = fmt.Sprintf("not verified: more than %d signatures in the message", max)
		case hasTag(t, "l"):
			// go-msgauth fails these too, but only after the key lookup and
			// with a vaguer reason.
			r.Result = Fail
			r.Error = "l= (body length) tag not accepted: content after the signed length would be unauthenticated (RFC 6376 section 8.2)"
		default:
			r.Result, r.Error = classifyVerification(verifs[i].Err)
		}
		if r.Domain == "" && i < len(verifs) {
			r.Domain = verifs[i].Domain
		}
		results = append(results, r)
	}
	return results, nil
}

func hasTag(t map[string]string, k string) bool {
	_, ok := t[k]
	return ok
}

// classifyVerification maps go-msgauth's verification error to an RFC 8601
// result word and a reason without the "dkim: " prefix.
func classifyVerification(err error) (result, reason string) {
	if err == nil {
		return Pass, ""
	}
	reason = strings.TrimPrefix(err.Error(), "dkim: ")
	switch {
	case msgdkim.IsTempFail(err):
		return TempError, reason
	case msgdkim.IsPermFail(err):
		return PermError, reason
	default:
		return Fail, reason
	}
}
