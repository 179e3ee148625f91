package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Managed domains: the domains whose DNS envelopd publishes records for
// and checks (package domain owns what the records are). The store keeps
// each domain's settings as the domain package wrote them (Config, JSON),
// the outcome of its last check (Checks, JSON), and its status; the one
// rule it enforces is the event: the transaction that first makes a
// domain's status "verified" writes its domain.verified event (a trigger,
// as the message events are), so the event exists exactly when the fact
// is durable.

// EventDomainVerified is the event of a domain whose check first passed.
const EventDomainVerified = "domain.verified"

// Domain statuses.
const (
	DomainPending  = "pending"  // added, never fully right
	DomainVerified = "verified" // the last check found every record right
	DomainInvalid  = "invalid"  // verified once, a later check found a record wrong
)

// ErrDomainExists: the domain is already managed.
var ErrDomainExists = errors.New("store: domain already managed")

// ManagedDomain is one managed domain.
type ManagedDomain struct {
	Name       string // lower case, A-labels, no trailing dot
	Config     string // JSON, package domain's
	Status     string
	Checks     string // JSON of the last check, "" before the first
	ClientID   string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	CheckedAt  time.Time // zero: never checked
	VerifiedAt time.Time // zero: never verified
}

// DomainStore is the managed domains' part of the store, on both
// backends.
type DomainStore interface {
	// AddDomain stores d (status pending); ErrDomainExists when its name
	// (or, when set, its client id) is already managed.
	AddDomain(ctx context.Context, d ManagedDomain) error
	// ManagedDomain returns one domain, or ErrNotFound.
	ManagedDomain(ctx context.Context, name string) (ManagedDomain, error)
	// ManagedDomains lists them, newest first.
	ManagedDomains(ctx context.Context) ([]ManagedDomain, error)
	// DeleteDomain forgets a domain (ErrNotFound when unknown).
	DeleteDomain(ctx context.Context, name string) error
	// SetDomainCheck records a check's outcome: ok true makes the status
	// verified (and writes domain.verified the first time), false makes
	// a verified domain invalid and leaves a pending one pending. It
	// returns the domain as stored.
	SetDomainCheck(ctx context.Context, name string, ok bool, checks string, at time.Time) (ManagedDomain, error)
}

var (
	_ DomainStore = (*SQLite)(nil)
	_ DomainStore = (*Postgres)(nil)
)

const domainCols = `name, config, status, checks, coalesce(client_id, ''), created_at, updated_at, checked_at, verified_at`

func scanDomain(sc scanner) (ManagedDomain, error) {
	var d ManagedDomain
	var created, updated, checked, verified int64
	if err := sc.Scan(&d.Name, &d.Config, &d.Status, &d.Checks, &d.ClientID, &created, &updated, &checked, &verified); err != nil {
		return d, err
	}
	d.CreatedAt, d.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	if checked != 0 {
		d.CheckedAt = time.Unix(0, checked).UTC()
	}
	if verified != 0 {
		d.VerifiedAt = time.Unix(0, verified).UTC()
	}
	return d, nil
}

// AddDomain implements DomainStore.
func (s domainRoom) AddDomain(ctx context.Context, d ManagedDomain) error {
	if d.Name == "" || d.Config == "" {
		return fmt.Errorf("%w: domain without name or config", ErrBadInput)
	}
	var cid any
	if d.ClientID != "" {
		cid = d.ClientID
	}
	at := d.CreatedAt.UTC().UnixNano()
	return s.write(ctx, func(tx Tx) error {
		// ON CONFLICT: two adds racing (two nodes) — exactly one wins.
		res, err := tx.Exec(`INSERT INTO domains (name, config, status, checks, client_id, created_at, updated_at, checked_at, verified_at)
			VALUES (?, ?, ?, '', ?, ?, ?, 0, 0) ON CONFLICT DO NOTHING`, d.Name, d.Config, DomainPending, cid, at, at)
		if err != nil {
			return fmt.Errorf("store: add domain: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: add domain: %w", err)
		} else if n == 0 {
			return fmt.Errorf("domain %s: %w", d.Name, ErrDomainExists)
		}
		return nil
	})
}

// ManagedDomain implements DomainStore.
func (s domainRoom) ManagedDomain(ctx context.Context, name string) (ManagedDomain, error) {
	if s.isClosed() {
		return ManagedDomain{}, ErrClosed
	}
	d, err := scanDomain(s.r.QueryRowContext(ctx, `SELECT `+domainCols+` FROM domains WHERE name = ?`, name))
	return one(d, err, "domain", "domain "+name)
}

// ManagedDomains implements DomainStore.
func (s domainRoom) ManagedDomains(ctx context.Context) ([]ManagedDomain, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return queryAll(ctx, s.r, "domains", scanDomain, `SELECT `+domainCols+` FROM domains ORDER BY created_at DESC, name`)
}

// DeleteDomain implements DomainStore.
func (s domainRoom) DeleteDomain(ctx context.Context, name string) error {
	return s.writeOne(ctx, "delete domain", "domain "+name, `DELETE FROM domains WHERE name = ?`, name)
}

// SetDomainCheck implements DomainStore.
func (s domainRoom) SetDomainCheck(ctx context.Context, name string, ok bool, checks string, at time.Time) (ManagedDomain, error) {
	var out ManagedDomain
	err := s.writeLogged(ctx, func(tx Tx) error {
		cur, err := scanDomain(tx.QueryRow(`SELECT `+domainCols+` FROM domains WHERE name = ?`, name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("domain %s: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: domain check: %w", err)
		}
		status := cur.Status
		switch {
		case ok:
			status = DomainVerified
		case status == DomainVerified:
			status = DomainInvalid
		}
		n := at.UTC().UnixNano()
		verified := int64(0)
		if !cur.VerifiedAt.IsZero() {
			verified = cur.VerifiedAt.UnixNano()
		}
		if ok && verified == 0 {
			verified = n
		}
		// The status change to verified fires the domain.verified
		// trigger (migration 17) in this transaction.
		if _, err := tx.Exec(`UPDATE domains SET status = ?, checks = ?, checked_at = ?, verified_at = ?, updated_at = ? WHERE name = ?`,
			status, checks, n, verified, n, name); err != nil {
			return fmt.Errorf("store: domain check: %w", err)
		}
		cur.Status, cur.Checks, cur.CheckedAt, cur.UpdatedAt = status, checks, at.UTC(), at.UTC()
		if verified != 0 {
			cur.VerifiedAt = time.Unix(0, verified).UTC()
		}
		out = cur
		return nil
	})
	return out, err
}
