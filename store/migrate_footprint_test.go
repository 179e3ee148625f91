package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
)

// TestPostgresMigrateFootprint: Postgres migration 29 (the filter tags in
// one GIN index instead of message_tags rows, the narrower exact-copy key
// that also serves the Message-ID lookups, the Envelopay-id index without
// the mail that has none) over rows written at version 28: each reads
// back byte for byte (raw bytes of both codecs, errors and warnings), each
// filter tag finds exactly its messages (through the tag index, the
// filters being rare), a lookup by Message-ID (one longer than a btree
// entry too) and by Envelopay id finds its thread, and an identical copy
// arriving again is answered from the stored row.
func TestPostgresMigrateFootprint(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	db, err := store.PGMigrateTo(ctx, dsn, 28)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 3000) + "@x.test"
	big := bytes.Repeat([]byte("Subject: hello\r\n\r\nthe same line again and again\r\n"), 40)
	old := []struct {
		mid, sender, typ, eid, status, errs, warns string
		raw                                        []byte
		compressed                                 bool
	}{
		{"a1@x.test", "a@x.test", "pay", "pay_1", "accepted", `[]`,
			`[{"code":"late","field":"date","message":"old date"}]`, []byte("Subject: one\r\n\r\nbody\r\n"), false},
		{long, "b@x.test", "", "", "quarantined", `[{"code":"not_envelopay","field":"subject","message":"not a type"}]`,
			`[]`, big, true},
		{"a3@x.test", "a@x.test", "offer", "offer_3", "accepted", `[]`, `[]`, []byte("Subject: three\r\n\r\n\x00\xff\r\n"), false},
	}
	ids := make([]int64, len(old))
	for i, o := range old {
		raw, codec := o.raw, 0
		if o.compressed {
			if raw, codec = store.EncodeRaw(o.raw); codec == 0 {
				t.Fatal("the compressed row's raw bytes were not compressed")
			}
		}
		ids[i] = int64(i+1) << 10
		sum := sha256.Sum256(o.raw)
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO messages (id, mailbox, direction, message_id, content_hash, sender, recipients, subject, type,
				envelopay_id, status, thread_id, received_at, errors, warnings, auth_results, size)
				VALUES ($1, '', 'in', $2, $3, $4, '["in@x.test"]', $5, $6, $7, $8, $9, $10, $11, $12, '', $13)`,
				[]any{ids[i], o.mid, sum[:], o.sender, fmt.Sprintf("old %d", i+1), o.typ, o.eid, o.status,
					fmt.Sprintf("t_old%d", i+1), int64(i+1) * 1e9, o.errs, o.warns, len(o.raw)}},
			{`INSERT INTO message_raw (message_id, raw, codec) VALUES ($1, $2, $3)`, []any{ids[i], raw, codec}},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				db.Close()
				t.Fatal(err)
			}
		}
	}
	var tags int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM message_tags`).Scan(&tags); err != nil || tags != 10 {
		t.Errorf("message_tags at version 28: %d %v, want 10", tags, err)
	}
	db.Close()

	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.SchemaVersionPostgres(ctx); err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version %d %v, want %d", v, err, store.SchemaVersion)
	}
	for i, o := range old {
		m, err := s.Message(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Raw, o.raw) || m.MessageID != o.mid || m.Sender != o.sender || m.EnvelopayID != o.eid ||
			m.Status != o.status || m.Size != len(o.raw) {
			t.Errorf("message %d after the migration: %q %.20q %q %q %q %d", i+1, m.Raw, m.MessageID, m.Sender, m.EnvelopayID, m.Status, m.Size)
		}
		errs, _ := json.Marshal(m.Errors)
		warns, _ := json.Marshal(m.Warnings)
		if string(errs) != o.errs || string(warns) != o.warns {
			t.Errorf("message %d errors %s warnings %s, want %s %s", i+1, errs, warns, o.errs, o.warns)
		}
	}
	waitIndexed(t, s, len(old), "in@x.test")
	for _, tc := range []struct {
		q    store.InboxQuery
		want []int64
	}{
		{store.InboxQuery{Type: "pay"}, []int64{ids[0]}},
		{store.InboxQuery{Sender: "a@x.test"}, []int64{ids[2], ids[0]}},
		{store.InboxQuery{ErrorCode: "not_envelopay"}, []int64{ids[1]}},
		{store.InboxQuery{ErrorCode: "late"}, []int64{ids[0]}},
		{store.InboxQuery{Labels: []string{store.StatusQuarantined}}, []int64{ids[1]}},
		{store.InboxQuery{Labels: []string{store.StatusAccepted}, Sender: "a@x.test", Type: "offer"}, []int64{ids[2]}},
		{store.InboxQuery{ErrorCode: "none"}, nil},
	} {
		tc.q.Inbox = "in@x.test"
		if got := inboxIDs(t, s, tc.q); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%+v: %v, want %v", tc.q, got, tc.want)
		}
	}
	for _, tc := range []struct{ ref, thread string }{
		{"<a1@x.test>", "t_old1"}, {long, "t_old2"}, {"offer_3", "t_old3"}, {"pay_1", "t_old1"},
	} {
		ms, err := s.Thread(ctx, tc.ref)
		if err != nil || len(ms) != 1 || ms[0].ThreadID != tc.thread {
			t.Errorf("thread of %.20q: %d messages %v, want %s", tc.ref, len(ms), err, tc.thread)
		}
	}
	if m, err := s.InboxMessageByRef(ctx, "in@x.test", "<"+long+">"); err != nil || m.ID != ids[1] {
		t.Errorf("by Message-ID: %v, want message %d", err, ids[1])
	}
	// The second message again, byte for byte: a redelivery, answered
	// from the stored row through the new copy key.
	out, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: long, Sender: "b@x.test",
		Recipients: []string{"in@x.test"}, Raw: big, Status: store.StatusQuarantined})
	if err != nil || !out.Redelivery || out.ID != ids[1] || out.ThreadID != "t_old2" || out.Status != store.StatusQuarantined {
		t.Errorf("the same message again: %+v %v, want a redelivery of %d", out, err, ids[1])
	}
}
