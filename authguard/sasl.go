package authguard

import (
	"bytes"
	"errors"

	"github.com/emersion/go-sasl"
)

// NewPlainServer is the server side of SASL PLAIN (RFC 4616) for every
// front end. Unlike go-sasl's, it hands a malformed response to check as
// well (as identity, user and password ""), so that a malformed exchange
// costs what a wrong password costs instead of an instant
// answer; check decides (and should refuse an identity other than user
// only after a full check).
func NewPlainServer(check func(identity, user, pass string) error) sasl.Server {
	return &plainServer{check: check}
}

type plainServer struct {
	check func(identity, user, pass string) error
	done  bool
}

func (p *plainServer) Next(resp []byte) ([]byte, bool, error) {
	if p.done {
		return nil, true, errors.New("sasl plain: unexpected response")
	}
	if resp == nil {
		return []byte{}, false, nil // empty challenge: send the credentials
	}
	p.done = true
	parts := bytes.Split(resp, []byte{0})
	if len(parts) != 3 {
		return nil, true, p.check("", "", "")
	}
	return nil, true, p.check(string(parts[0]), string(parts[1]), string(parts[2]))
}
