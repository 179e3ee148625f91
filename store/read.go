package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// rawCols are a message's stored raw bytes and their codec (rawcodec.go),
// from message_raw r.
const rawCols = `r.raw, coalesce(r.codec, 0)`

const messageCols = `m.id, m.mailbox, m.direction, m.message_id, m.sender, m.recipients, m.subject, m.type,
	m.envelopay_id, m.status, m.thread_id, m.received_at, m.errors, m.warnings, m.result, m.dkim,
	m.auth_results, m.size, m.oops`

type scanner interface {
	Scan(dest ...any) error
}

func scanMessage(sc scanner, withRaw bool) (Message, error) {
	var m Message
	var rcpts, errs, warns string
	var at int64
	var result, dkim, oops []byte
	dest := []any{&m.ID, &m.Mailbox, &m.Direction, &m.MessageID, &m.Sender, &rcpts, &m.Subject, &m.Type,
		&m.EnvelopayID, &m.Status, &m.ThreadID, &at, &errs, &warns, &result, &dkim, &m.AuthResults, &m.Size, &oops}
	var codec int64
	if withRaw {
		dest = append(dest, &m.Raw, &codec)
	}
	if err := sc.Scan(dest...); err != nil {
		return Message{}, err
	}
	if withRaw && m.Raw == nil {
		m.Raw = []byte{}
	}
	if withRaw && codec != codecNone {
		raw, err := raws.decode(m.Raw, codec)
		if err != nil {
			return Message{}, err
		}
		m.Raw = raw
	}
	m.Recipients = []string{}
	if err := json.Unmarshal([]byte(rcpts), &m.Recipients); err != nil {
		return Message{}, fmt.Errorf("store: message %d: recipients: %w", m.ID, err)
	}
	m.ReceivedAt = time.Unix(0, at).UTC()
	if len(result) > 0 {
		j, err := raws.decodeResult(result)
		if err != nil {
			return Message{}, fmt.Errorf("store: message %d: %w", m.ID, err)
		}
		m.Result = json.RawMessage(j)
	}
	m.Errors, m.Warnings = decodeProblemCols(errs, warns, m.Result)
	if len(dkim) > 0 {
		m.DKIM = json.RawMessage(dkim)
	}
	if len(oops) > 0 && string(oops) != "null" {
		m.OOPS = &OOPSRecord{}
		if err := json.Unmarshal(oops, m.OOPS); err != nil {
			return Message{}, fmt.Errorf("store: message %d: oops: %w", m.ID, err)
		}
	}
	return m, nil
}

// Message implements Store; the raw bytes are included.
func (s rulesRoom) Message(ctx context.Context, id int64) (*Message, error) {
	return s.message(ctx, id, true)
}

// MessageInfo implements Store: Message without the raw bytes.
func (s rulesRoom) MessageInfo(ctx context.Context, id int64) (*Message, error) {
	return s.message(ctx, id, false)
}

func (s rulesRoom) message(ctx context.Context, id int64, withRaw bool) (*Message, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	q := `SELECT ` + messageCols + ` FROM messages m WHERE m.id = ?`
	if withRaw {
		q = `SELECT ` + messageCols + `, ` + rawCols + `
		FROM messages m LEFT JOIN message_raw r ON r.message_id = m.id WHERE m.id = ?`
	}
	m, err := scanMessage(s.r.QueryRowContext(ctx, q, id), withRaw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: message %d: %w", id, err)
	}
	ms := []Message{m}
	if err := s.attachPayments(ctx, len(ms), func(i int) *Message { return &ms[i] }); err != nil {
		return nil, err
	}
	return &ms[0], nil
}

// attachPayments sets the Payment of the n messages at(i) that may carry
// one (received PAY, ORDER, ACCEPT, OFFER): one read of the payments
// table for the lot, none when no message may.
func (s *core) attachPayments(ctx context.Context, n int, at func(i int) *Message) error {
	var ids []int64
	for i := range n {
		m := at(i)
		if m.Direction == DirIn && paymentTypes[m.Type] {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	ps, err := paymentRoom{s}.PaymentsFor(ctx, ids) // the payment room answers for payments
	if err != nil {
		return err
	}
	for i := range n {
		if m := at(i); ps[m.ID] != nil {
			m.Payment = ps[m.ID]
		}
	}
	return nil
}

// paymentTypes are the Envelopay types whose messages carry a proof.
var paymentTypes = map[string]bool{"pay": true, "order": true, "accept": true, "offer": true}

// Messages implements Store: matching messages in id order (the order they
// were stored), after f.AfterID, at most f.Limit.
func (s rulesRoom) Messages(ctx context.Context, f Filter) ([]Message, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	add("m.id > ?", f.AfterID)
	if s.d.visible != "" {
		// Listings feed cursors (watch, AfterID, the newest id seen):
		// stop before any row a transaction still running may yet
		// commit below.
		where = append(where, s.d.visible)
	}
	if f.Mailbox != "" {
		add("m.mailbox = ? AND m.mailbox <> ''", f.Mailbox)
	}
	if f.Direction != "" {
		add("m.direction = ?", f.Direction)
	}
	if f.Type != "" {
		add("m.type = ?", f.Type)
	}
	if f.Status != "" {
		add("m.status = ?", f.Status)
	}
	if f.ThreadID != "" {
		c, a := s.d.threadIs("m.thread_id", f.ThreadID)
		where, args = append(where, c), append(args, a...)
	}
	q := `SELECT ` + messageCols
	if f.WithRaw {
		q += `, ` + rawCols + ` FROM messages m LEFT JOIN message_raw r ON r.message_id = m.id`
	} else {
		q += ` FROM messages m`
	}
	q += ` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY m.id`
	if f.Newest {
		q += ` DESC`
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return s.query(ctx, q, f.WithRaw, args...)
}

func (s *core) query(ctx context.Context, q string, withRaw bool, args ...any) ([]Message, error) {
	ms, err := queryAll(ctx, s.r, "messages", func(sc scanner) (Message, error) { return scanMessage(sc, withRaw) }, q, args...)
	if err != nil {
		return nil, err
	}
	if err := s.attachPayments(ctx, len(ms), func(i int) *Message { return &ms[i] }); err != nil {
		return nil, err
	}
	return ms, nil
}

// Thread implements Store. ref is tried as a thread id, then as a
// Message-ID (angle brackets allowed), then as an Envelopay id; the thread
// of the earliest matching message wins. Raw bytes are not included.
func (s rulesRoom) Thread(ctx context.Context, ref string) ([]Message, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, fmt.Errorf("thread %q: %w", ref, ErrNotFound)
	}
	thread := ""
	mid := strings.TrimSuffix(strings.TrimPrefix(ref, "<"), ">")
	byMID, midArgs := s.d.midIs("message_id", mid)
	byThread, threadArgs := s.d.threadIs("thread_id", ref)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`SELECT thread_id FROM messages WHERE ` + byThread + ` LIMIT 1`, threadArgs},
		{`SELECT thread_id FROM messages WHERE ` + byMID + ` ORDER BY id LIMIT 1`, midArgs},
		{`SELECT thread_id FROM messages WHERE envelopay_id = ? AND envelopay_id <> '' ORDER BY status = 'accepted' DESC, id LIMIT 1`, []any{ref}},
	} {
		err := s.r.QueryRowContext(ctx, q.sql, q.args...).Scan(&thread)
		if err == nil {
			break
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: thread: %w", err)
		}
	}
	if thread == "" {
		return nil, fmt.Errorf("thread %q: %w", ref, ErrNotFound)
	}
	inThread, args := s.d.threadIs("m.thread_id", thread)
	return s.query(ctx, `SELECT `+messageCols+` FROM messages m WHERE `+inThread+` ORDER BY m.id`, false, args...)
}

// WaitNew implements Store. It wakes on commits of this process at once and
// polls every Options.PollInterval for rows written by other processes
// (`envelopd watch` next to `envelopd serve`).
func (s rulesRoom) WaitNew(ctx context.Context, after int64) error {
	return s.waitAbove(ctx, after, func(ctx context.Context) (int64, error) {
		var max int64
		if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages m`+s.where(s.d.visible)).Scan(&max); err != nil {
			return 0, fmt.Errorf("store: wait: %w", err)
		}
		return max, nil
	})
}

// waitAbove blocks until latest reports an id above after, the store
// closes or ctx ends (WaitNew, WaitEvents). It wakes on this process's
// commits at once (the channel is taken before reading, so no commit is
// missed) and polls every Options.PollInterval for other processes'.
func (s *core) waitAbove(ctx context.Context, after int64, latest func(context.Context) (int64, error)) error {
	t := time.NewTicker(s.pollInterval)
	defer t.Stop()
	for {
		if s.isClosed() {
			return ErrClosed
		}
		ch := s.newMsgChan()
		max, err := latest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if max > after {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
		case <-s.quit:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// where is " WHERE cond", or "" for an empty cond.
func (s *core) where(cond string) string {
	if cond == "" {
		return ""
	}
	return " WHERE " + cond
}

// and is " AND cond", or "" for an empty cond.
func (s *core) and(cond string) string {
	if cond == "" {
		return ""
	}
	return " AND " + cond
}
