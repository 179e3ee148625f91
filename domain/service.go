package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/envelopd/envelopd/store"
)

// StateUnchecked is the state of a record before the domain's first
// check.
const StateUnchecked = "unchecked"

// Service manages domains over the store; the CLI and the HTTP API use
// it as is.
type Service struct {
	Store   store.DomainStore
	Checker Checker
	Now     func() time.Time // default time.Now
	// Hostname is the MX target of a domain added without one (serve's
	// --hostname); Keys the DKIM keys envelopd signs a domain's mail
	// with, for a domain added without them. Both optional.
	Hostname string
	Keys     func(ctx context.Context, domain string) ([]DKIMKey, error)
}

// Domain is a managed domain as the CLI and the API show it.
type Domain struct {
	Name       string     `json:"domain"`
	Status     string     `json:"status"` // store.DomainPending, DomainVerified, DomainInvalid
	Records    []Result   `json:"records"`
	ClientID   string     `json:"client_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	CheckedAt  *time.Time `json:"checked_at"`
	VerifiedAt *time.Time `json:"verified_at"`
	Config     Config     `json:"config"`
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// view turns a stored domain into a Domain: the last check's results,
// or the records unchecked.
func view(d store.ManagedDomain) (Domain, error) {
	out := Domain{Name: d.Name, Status: d.Status, ClientID: d.ClientID, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if err := json.Unmarshal([]byte(d.Config), &out.Config); err != nil {
		return out, fmt.Errorf("domain %s: stored config: %w", d.Name, err)
	}
	if !d.CheckedAt.IsZero() {
		t := d.CheckedAt
		out.CheckedAt = &t
	}
	if !d.VerifiedAt.IsZero() {
		t := d.VerifiedAt
		out.VerifiedAt = &t
	}
	if d.Checks != "" {
		if err := json.Unmarshal([]byte(d.Checks), &out.Records); err == nil {
			return out, nil
		}
	}
	for _, r := range Records(d.Name, out.Config) {
		out.Records = append(out.Records, Result{Kind: r.Kind, Type: r.Type, Name: r.Name, Priority: r.Priority, Want: want(r), State: StateUnchecked})
	}
	return out, nil
}

// validate checks c's settings and fills the defaults for domain d.
func validate(d string, c Config, now time.Time) (Config, error) {
	bad := func(err error, format string, args ...any) (Config, error) {
		return c, &Error{Err: err, Reason: fmt.Sprintf(format, args...)}
	}
	if c.Hostname == "" {
		return bad(ErrNoHostname, "the MX target is unknown: give the host name envelopd answers SMTP on (--hostname)")
	}
	h, err := toASCII(strings.TrimSuffix(c.Hostname, "."))
	if err != nil || !strings.Contains(h, ".") || strings.HasPrefix(h, "*") {
		return bad(ErrInvalid, "hostname %q: want a fully qualified host name", c.Hostname)
	}
	c.Hostname = h
	c = c.defaults(d)
	if !strings.EqualFold(firstTerm(c.SPF), "v=spf1") || strings.ContainsAny(c.SPF, "\"\\\r\n") {
		return bad(ErrInvalid, "SPF %q: want a record starting v=spf1", c.SPF)
	}
	for _, a := range []string{c.DMARCReport, c.TLSReport} {
		if p, err := mail.ParseAddress(a); err != nil || p.Address != a || p.Name != "" || strings.ContainsAny(a, ";,!\" ") {
			return bad(ErrInvalid, "report address %q: want local@domain", a)
		}
	}
	switch c.DMARCPolicy {
	case "none", "quarantine", "reject":
	default:
		return bad(ErrInvalid, "DMARC policy %q: want none, quarantine or reject", c.DMARCPolicy)
	}
	switch c.STSMode {
	case "testing", "enforce":
	default:
		return bad(ErrInvalid, "MTA-STS mode %q: want testing or enforce", c.STSMode)
	}
	if c.STSID == "" {
		c.STSID = now.UTC().Format("20060102T150405")
	}
	for _, k := range c.DKIM {
		if k.Selector == "" || strings.ContainsAny(k.Selector+k.TXT, "\"\\\r\n") || !strings.Contains(k.TXT, "p=") {
			return bad(ErrInvalid, "DKIM key %q: want a selector and its v=DKIM1 TXT value", k.Selector)
		}
	}
	return c, nil
}

// Add starts managing domain name (Normalize) with config c (defaults
// filled in); clientID makes a retried create idempotent (the API's
// client_id): the same clientID returns the domain it made.
func (s *Service) Add(ctx context.Context, name string, c Config, clientID string) (Domain, error) {
	d, err := Normalize(name)
	if err != nil {
		return Domain{}, err
	}
	if c.Hostname == "" {
		c.Hostname = s.Hostname
	}
	if c.DKIM == nil && s.Keys != nil {
		if c.DKIM, err = s.Keys(ctx, d); err != nil {
			return Domain{}, err
		}
	}
	now := s.now()
	if c, err = validate(d, c, now); err != nil {
		return Domain{}, err
	}
	b, _ := json.Marshal(c)
	err = s.Store.AddDomain(ctx, store.ManagedDomain{Name: d, Config: string(b), ClientID: clientID, CreatedAt: now})
	if errors.Is(err, store.ErrDomainExists) {
		if prev, gerr := s.Store.ManagedDomain(ctx, d); gerr == nil && clientID != "" && prev.ClientID == clientID {
			return view(prev)
		}
		return Domain{}, &Error{Name: name, Err: ErrExists, Reason: "already managed (envelopd domain delete it first to start over)"}
	}
	if err != nil {
		return Domain{}, err
	}
	return s.Get(ctx, d)
}

// lookupName normalizes a name given to Get, Check, Delete, Zone; an
// unknown one is ErrNotFound.
func (s *Service) stored(ctx context.Context, name string) (store.ManagedDomain, error) {
	d, err := Normalize(name)
	if err != nil {
		return store.ManagedDomain{}, err
	}
	md, err := s.Store.ManagedDomain(ctx, d)
	if errors.Is(err, store.ErrNotFound) {
		return md, &Error{Name: name, Err: ErrNotFound, Reason: "not a managed domain (envelopd domain add it)"}
	}
	return md, err
}

// Get returns a managed domain.
func (s *Service) Get(ctx context.Context, name string) (Domain, error) {
	md, err := s.stored(ctx, name)
	if err != nil {
		return Domain{}, err
	}
	return view(md)
}

// List returns the managed domains, newest first.
func (s *Service) List(ctx context.Context) ([]Domain, error) {
	mds, err := s.Store.ManagedDomains(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Domain, 0, len(mds))
	for _, md := range mds {
		d, err := view(md)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Delete stops managing a domain.
func (s *Service) Delete(ctx context.Context, name string) error {
	md, err := s.stored(ctx, name)
	if err != nil {
		return err
	}
	err = s.Store.DeleteDomain(ctx, md.Name)
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Name: name, Err: ErrNotFound, Reason: "not a managed domain"}
	}
	return err
}

// Check looks every record of a domain up, stores the outcome (the
// first all-right check writes domain.verified) and returns the domain
// with the results.
func (s *Service) Check(ctx context.Context, name string) (Domain, error) {
	md, err := s.stored(ctx, name)
	if err != nil {
		return Domain{}, err
	}
	d, err := view(md)
	if err != nil {
		return Domain{}, err
	}
	results, ok := s.Checker.Check(ctx, Records(md.Name, d.Config))
	b, _ := json.Marshal(results)
	md, err = s.Store.SetDomainCheck(ctx, md.Name, ok, string(b), s.now())
	if err != nil {
		return Domain{}, err
	}
	return view(md)
}

// Zone returns a domain's records as a BIND zone-file fragment.
func (s *Service) Zone(ctx context.Context, name string) (string, error) {
	d, err := s.Get(ctx, name)
	if err != nil {
		return "", err
	}
	return Zone(d.Name, d.Config), nil
}

// Policy returns the MTA-STS policy of a managed domain (ErrNotFound
// for another).
func (s *Service) Policy(ctx context.Context, name string) (string, error) {
	d, err := s.Get(ctx, name)
	if err != nil {
		return "", err
	}
	return STSPolicy(d.Name, d.Config), nil
}
