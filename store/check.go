package store

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/envelopd/envelopd/protocols"
)

// refTypes maps each typed ref to the type of message it must name
// (Envelopay v0.2.0 "Identifiers"); the OOPS "ref" may name any type ("").
var refTypes = map[string]string{
	"order_ref":   "order",
	"invoice_ref": "invoice",
	"offer_ref":   "offer",
	"which_ref":   "which",
	"ref":         "",
}

// Check applies to in every rule Ingest would apply — the stateless
// errors it carries, threading, ACCEPT against its OFFER's want,
// duplicate_id, duplicate_proof, claims, chain links, protocol state —
// and returns the Outcome Ingest would return, writing nothing (the
// ingest runs in a savepoint that is rolled back; no OOPS is composed).
//
// On top of Ingest's rules, Check requires each typed ref to name a stored
// message of its type in in's mailbox (unknown_ref): a message we are about
// to send must answer something we know, whereas received mail may answer
// what predates this store. It is how send, reply and compose check an
// outbound message against the thread's stored state before queueing it.
func (s rulesRoom) Check(ctx context.Context, in *Incoming) (Outcome, error) {
	if err := checkIncoming(in); err != nil {
		return Outcome{}, err
	}
	cp := *in
	cp.OOPS = nil
	cp.Handoff = nil
	var out Outcome
	err := s.write(ctx, func(tx Tx) error {
		// Its own savepoint, rolled back: a write that fails would make
		// SQLite's writer run the rest of its batch again (writer.go).
		if _, err := tx.Exec("SAVEPOINT dry"); err != nil {
			return fmt.Errorf("store: savepoint: %w", err)
		}
		o, err := checkTx(tx, &cp)
		if _, rerr := tx.Exec("ROLLBACK TO dry"); rerr != nil && err == nil {
			err = fmt.Errorf("store: rollback savepoint: %w", rerr)
		}
		if _, rerr := tx.Exec("RELEASE dry"); rerr != nil && err == nil {
			err = fmt.Errorf("store: release savepoint: %w", rerr)
		}
		out = o
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	out.ID = 0 // the row was never kept
	return out, nil
}

// checkTx is Check's dry-run ingest; the caller rolls back what it wrote.
func checkTx(tx Tx, in *Incoming) (Outcome, error) {
	o, _, err := ingestTx(tx, in, false)
	if err != nil {
		return Outcome{}, err
	}
	ps, err := unknownRefs(tx, in)
	if err != nil {
		return Outcome{}, err
	}
	if len(ps) > 0 {
		o.Errors = append(o.Errors, ps...)
		o.Status = finalStatus(in.Status, o.Errors, o.Replay)
	}
	return o, nil
}

// unknownRefs reports each typed ref of in that names no stored message of
// its type in in's mailbox (code unknown_ref, field the ref's name).
func unknownRefs(tx Tx, in *Incoming) (protocols.Problems, error) {
	var ps protocols.Problems
	for _, k := range slices.Sorted(maps.Keys(in.Refs)) {
		ref := in.Refs[k]
		want, typed := refTypes[k]
		if ref == "" || !typed {
			continue
		}
		var n int
		err := tx.QueryRow(`SELECT count(*) FROM messages`+tx.dialect().eidIndex+`
			WHERE envelopay_id = ? AND envelopay_id <> '' AND mailbox = ? AND (? = '' OR type = ?)`, ref, in.Mailbox, want, want).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("store: look up %s: %w", k, err)
		}
		if n == 0 {
			what := "message"
			if want != "" {
				what = want
			}
			ps = append(ps, protocols.New(protocols.CodeUnknownRef, k,
				"%s %q names no stored %s", k, ref, what))
		}
	}
	return ps, nil
}
