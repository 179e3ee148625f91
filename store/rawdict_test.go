package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// corpusMail is every .eml under testdata, in path order, with its lines
// ended by CRLF as mail arrives over SMTP (RFC 5321 §2.3.8), and the
// paths.
func corpusMail(t testing.TB) (mails [][]byte, paths []string) {
	root := filepath.Join("..", "testdata")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".eml") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		mails = append(mails, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")))
	}
	return mails, paths
}

// mailDictionary is how codecdict/mail.raw was made (codecdict/README.md):
// the lines (CRLF included, 8 bytes or longer) that at least two of the
// mails hold, each once, the ones more mails hold later (a frame reaches
// the end of a dictionary at the shortest offsets), ties in byte order;
// while over max bytes, the earliest lines are dropped.
func mailDictionary(mails [][]byte, max int) []byte {
	held := map[string]int{}
	for _, m := range mails {
		seen := map[string]bool{}
		for _, l := range strings.SplitAfter(string(m), "\r\n") {
			if len(l) >= 8 && !seen[l] {
				seen[l] = true
				held[l]++
			}
		}
	}
	var lines []string
	size := 0
	for l, n := range held {
		if n >= 2 {
			lines = append(lines, l)
			size += len(l)
		}
	}
	slices.SortFunc(lines, func(a, b string) int {
		if held[a] != held[b] {
			return held[a] - held[b]
		}
		return strings.Compare(a, b)
	})
	for size > max {
		size -= len(lines[0])
		lines = lines[1:]
	}
	return []byte(strings.Join(lines, ""))
}

// TestMailDictionaryRecipe rebuilds codecdict/mail.raw from the corpus
// as codecdict/README.md says and compares (ENVELOPD_MAIL_DICT=check),
// or writes it (=write, only ever for a new dictionary file). It runs
// only when asked: a .eml added to testdata later changes what the
// recipe makes, never the stored format.
func TestMailDictionaryRecipe(t *testing.T) {
	mode := os.Getenv("ENVELOPD_MAIL_DICT")
	if mode == "" {
		t.Skip("ENVELOPD_MAIL_DICT=check or write")
	}
	mails, _ := corpusMail(t)
	d := mailDictionary(mails, 16384)
	switch mode {
	case "write":
		if err := os.WriteFile(filepath.Join("codecdict", "mail.raw"), d, 0o644); err != nil {
			t.Fatal(err)
		}
	case "check":
		if !bytes.Equal(d, dictMail) {
			t.Errorf("the recipe makes %d bytes (SHA-256 %x), codecdict/mail.raw is %d", len(d), sha256.Sum256(d), len(dictMail))
		}
	default:
		t.Fatalf("ENVELOPD_MAIL_DICT=%q, want check or write", mode)
	}
}

// frameDict is the dictionary id in a frame's header (0: none).
func frameDict(t *testing.T, z []byte) uint32 {
	t.Helper()
	var h zstd.Header
	if err := h.Decode(z); err != nil {
		t.Fatal(err)
	}
	return h.DictionaryID
}

// TestMailDictionaryFrames: with the dictionary asked for, mail up to
// rawDictMax is a frame over it, smaller than one without and decoding
// to the exact bytes; larger mail, tiny mail, and a backend that does
// not ask keep frames without a dictionary.
func TestMailDictionaryFrames(t *testing.T) {
	t.Parallel()
	mails, paths := corpusMail(t)
	var with, without, n int
	for i, m := range mails {
		z, codec := raws.encodeRaw(m, true)
		got, err := raws.decode(z, int64(codec))
		if err != nil || !bytes.Equal(got, m) {
			t.Fatalf("%s: round trip over the dictionary: %v", paths[i], err)
		}
		plain, plainCodec := raws.encode(m)
		if z2, c2 := raws.encodeRaw(m, false); c2 != plainCodec || !bytes.Equal(z2, plain) {
			t.Errorf("%s: without the dictionary asked for, not the plain frame", paths[i])
		}
		if len(m) < 64 || len(m) > rawDictMax {
			if codec == codecZstd && frameDict(t, z) != 0 {
				t.Errorf("%s: %d bytes framed over dictionary %#x, want none", paths[i], len(m), frameDict(t, z))
			}
			continue
		}
		if codec != codecZstd || frameDict(t, z) != dictMailID {
			t.Errorf("%s: %d bytes: codec %d, want a frame over the mail dictionary", paths[i], len(m), codec)
			continue
		}
		with += len(z)
		without += len(plain)
		n++
	}
	if n < 100 || with*10 > without*7 {
		t.Errorf("%d mails over the dictionary: %d bytes, without %d: want at least 100 mails and 30 %% saved", n, with, without)
	}
}

// TestMailDictionaryFramesOnSQLite: a store holding frames over the mail
// dictionary (as a Postgres store writes them) reads them back exactly on
// SQLite, whose writer never makes them.
func TestMailDictionaryFramesOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mails, paths := corpusMail(t)
	want := map[int64][]byte{}
	for i, m := range mails {
		if len(m) < 64 || len(m) > rawDictMax {
			continue
		}
		out, err := s.Ingest(ctx, &Incoming{Direction: DirIn, MessageID: fmt.Sprintf("d%d@x.test", i), Sender: "a@x.test",
			Recipients: []string{"b@x.test"}, Raw: m, Status: StatusAccepted, ReceivedAt: time.Now()})
		if err != nil {
			t.Fatal(paths[i], err)
		}
		z, codec := raws.encodeRaw(m, true)
		if codec != codecZstd || frameDict(t, z) != dictMailID {
			t.Fatalf("%s: not a frame over the mail dictionary", paths[i])
		}
		if err := s.write(ctx, func(tx *wtx) error {
			_, err := tx.Exec(`UPDATE message_raw SET raw = ?, codec = ? WHERE message_id = ?`, z, codec, out.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want[out.ID] = m
	}
	all, err := s.Messages(ctx, Filter{WithRaw: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("%d messages, want %d", len(all), len(want))
	}
	for _, m := range all {
		if !bytes.Equal(m.Raw, want[m.ID]) {
			t.Errorf("Messages: message %d: %d bytes, want %d exact", m.ID, len(m.Raw), len(want[m.ID]))
		}
		one, err := s.Message(ctx, m.ID)
		if err != nil || !bytes.Equal(one.Raw, want[m.ID]) {
			t.Errorf("Message %d: %v, %d bytes, want %d exact", m.ID, err, len(one.Raw), len(want[m.ID]))
		}
	}
}

// TestMailDictionaryHeldOut: the recipe, made from half of the corpus
// (every other mail in path order), shrinks the other half's frames too
// — a figure not measured on the mail the dictionary was made from
// (docs/performance.md). -v logs the ratios.
func TestMailDictionaryHeldOut(t *testing.T) {
	t.Parallel()
	mails, _ := corpusMail(t)
	opts := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true)}
	plain, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for half := range 2 {
		var made, held [][]byte
		for i, m := range mails {
			if i%2 == half {
				made = append(made, m)
			} else {
				held = append(held, m)
			}
		}
		enc, err := zstd.NewWriter(nil, append(opts, zstd.WithEncoderDictRaw(dictMailID, mailDictionary(made, 16384)))...)
		if err != nil {
			t.Fatal(err)
		}
		var in, without, with int
		for _, m := range held {
			in += len(m)
			without += min(len(plain.EncodeAll(m, nil)), len(m))
			with += min(len(enc.EncodeAll(m, nil)), len(m))
		}
		t.Logf("made from half %d, %d held-out mails (%d bytes): frames %.3f of the mail without the dictionary, %.3f over it",
			half, len(held), in, float64(without)/float64(in), float64(with)/float64(in))
		if with*4 > without*3 {
			t.Errorf("held-out half: %d bytes over the dictionary, %d without: want 25 %% saved at least", with, without)
		}
	}
}
