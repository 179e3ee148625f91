package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRawBytesExact: raw bytes come back exactly as stored through every
// read of them (Message, Messages with raw), compressed or not —
// text that shrinks, random bytes that do not, tiny and empty mail — and
// a row written before compression (codec 0) reads as before.
func TestRawBytesExact(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	noise := make([]byte, 4000)
	rand.Read(noise)
	mail, err := os.ReadFile(filepath.Join("..", "testdata", "eml", "accept.eml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"text":   []byte(strings.Repeat("From: a@x.test\r\nSubject: order 12345\r\n\r\nhello hello hello\r\n", 40)),
		"mail":   mail,
		"noise":  noise,
		"tiny":   []byte("x"),
		"empty":  {},
		"crlf":   bytes.Repeat([]byte("\r\n"), 1000),
		"binary": append([]byte{0x28, 0xb5, 0x2f, 0xfd}, noise[:100]...), // starts like a zstd frame
	}
	ids := map[string]int64{}
	for name, raw := range cases {
		out, err := s.Ingest(ctx, &Incoming{Direction: DirIn, MessageID: name + "@x.test", Sender: "a@x.test",
			Recipients: []string{"b@x.test"}, Raw: raw, Status: StatusAccepted, ReceivedAt: time.Now()})
		if err != nil {
			t.Fatal(name, err)
		}
		ids[name] = out.ID
	}
	// A row from before compression: raw as received, codec 0.
	old := []byte(strings.Repeat("Received: from old\r\n", 50))
	if err := s.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(`UPDATE message_raw SET raw = ?, codec = 0 WHERE message_id = ?`, old, ids["text"])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cases["text"] = old
	var zstdRows int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM message_raw WHERE codec = 1`).Scan(&zstdRows); err != nil {
		t.Fatal(err)
	}
	if zstdRows < 2 {
		t.Errorf("%d rows compressed, want the mail and the CRLFs at least", zstdRows)
	}
	all, err := s.Messages(ctx, Filter{WithRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64][]byte{}
	for _, m := range all {
		byID[m.ID] = m.Raw
	}
	for name, raw := range cases {
		m, err := s.Message(ctx, ids[name])
		if err != nil {
			t.Fatal(name, err)
		}
		if !bytes.Equal(m.Raw, raw) || m.Raw == nil {
			t.Errorf("%s: Message raw %d bytes, want %d exact", name, len(m.Raw), len(raw))
		}
		if got := byID[ids[name]]; !bytes.Equal(got, raw) || got == nil {
			t.Errorf("%s: Messages raw %d bytes, want %d exact", name, len(got), len(raw))
		}
	}

	// A damaged compressed row is an error, not wrong bytes.
	if err := s.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(`UPDATE message_raw SET raw = x'28b52ffd0000ffff', codec = 1 WHERE message_id = ?`, ids["mail"])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Message(ctx, ids["mail"]); !errors.Is(err, errRawCodec) {
		t.Errorf("damaged row: %v, want errRawCodec", err)
	}
}

// FuzzRawCodec: whatever the bytes, decode(encode(b)) is b, and decoding
// arbitrary stored bytes returns an error or bytes, never a panic.
func FuzzRawCodec(f *testing.F) {
	f.Add([]byte("Subject: x\r\n\r\nbody\r\n"))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		z, codec := raws.encode(b)
		got, err := raws.decode(z, int64(codec))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("round trip: %v", err)
		}
		raws.decode(b, codecZstd)
	})
}
