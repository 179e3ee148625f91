package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/store"
	"github.com/klauspost/compress/zstd"
)

// TestPostgresMailDictionary: Postgres frames small raw mail over the
// mail dictionary and larger mail without one, and reads both back
// exactly (Message, Messages with raw).
func TestPostgresMailDictionary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	s, err := store.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	small := store.CorpusMail(t)[0]
	large := []byte(strings.Repeat("Received: from relay.example.net by mx.example.com\r\n", store.RawDictMax/40) + "\r\nbody\r\n")
	if len(small) > store.RawDictMax || len(large) <= store.RawDictMax {
		t.Fatalf("mails of %d and %d bytes: want one on each side of %d", len(small), len(large), store.RawDictMax)
	}
	cases := []struct {
		raw  []byte
		dict uint32
	}{{small, store.DictMailID}, {large, 0}}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var last int64
	for i, c := range cases {
		out, err := s.Ingest(ctx, &store.Incoming{Direction: store.DirIn, MessageID: fmt.Sprintf("dict%d@x.test", i), Sender: "a@x.test",
			Recipients: []string{"b@x.test"}, Raw: c.raw, Status: store.StatusAccepted, ReceivedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		last = out.ID
		var frame []byte
		var codec int
		if err := db.QueryRowContext(ctx, `SELECT raw, codec FROM message_raw WHERE message_id = $1`, out.ID).Scan(&frame, &codec); err != nil {
			t.Fatal(err)
		}
		if c.dict == 0 {
			// Over rawDictMax: the store's codec without the dictionary,
			// an S2 block at this size (rawPlainFrom…rawPlainTo).
			if codec != 2 {
				t.Fatalf("mail of %d bytes: codec %d, want 2 (an S2 block)", len(c.raw), codec)
			}
		} else {
			var h zstd.Header
			if err := h.Decode(frame); err != nil || codec != 1 {
				t.Fatalf("mail of %d bytes: codec %d, header %v: want a Zstandard frame", len(c.raw), codec, err)
			}
			if h.DictionaryID != c.dict {
				t.Errorf("mail of %d bytes: frame over dictionary %#x, want %#x", len(c.raw), h.DictionaryID, c.dict)
			}
		}
		m, err := s.Message(ctx, out.ID)
		if err != nil || !bytes.Equal(m.Raw, c.raw) {
			t.Errorf("Message %d: %v, %d bytes, want %d exact", out.ID, err, len(m.Raw), len(c.raw))
		}
	}
	// Listings on Postgres stop below the oldest transaction still running
	// on the server (other tests write there in parallel): wait until the
	// last message is listed, then read both.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.WaitNew(wctx, last-1); err != nil {
		t.Fatalf("WaitNew: %v", err)
	}
	all, err := s.Messages(ctx, store.Filter{WithRaw: true})
	if err != nil || len(all) != len(cases) {
		t.Fatalf("Messages: %d, %v", len(all), err)
	}
	for _, m := range all {
		if !bytes.Equal(m.Raw, small) && !bytes.Equal(m.Raw, large) {
			t.Errorf("Messages: message %d: %d bytes, not the mail stored", m.ID, len(m.Raw))
		}
	}
}
