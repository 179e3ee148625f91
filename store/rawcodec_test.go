package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
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
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM message_raw WHERE codec <> 0`).Scan(&zstdRows); err != nil {
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
	f.Add([]byte(`{"type":null,"note":"caf\u00e9 \"x\"","valid":true}`))
	f.Add([]byte("{\"type\":null,\"note\":\"000000\x80\"}"))
	f.Add([]byte("{\"type\":null,\"note\":\"a\tb\"}"))
	f.Add([]byte("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nhello=E2=82=AC\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		z, codec := raws.encode(b)
		got, err := raws.decode(z, int64(codec))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("round trip: %v", err)
		}
		// Over a reused buffer, the same frame.
		if z2, codec2 := raws.encodeTo(bytes.Repeat([]byte{0xaa}, 100), b); codec2 != codec || !bytes.Equal(z2, z) {
			t.Fatalf("encodeTo over a used buffer: codec %d, %d bytes; encode: codec %d, %d bytes", codec2, len(z2), codec, len(z))
		}
		// Over the mail dictionary (Postgres), the same bytes back.
		zd, codecd := raws.encodeRaw(b, true)
		if got, err := raws.decode(zd, int64(codecd)); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("round trip over the mail dictionary: %v", err)
		}
		raws.decode(b, codecZstd)
		raws.decode(b, codecS2)
		stored := raws.encodeResult(b)
		if len(b) == 0 {
			if stored != nil {
				t.Fatalf("empty result stored as %v, want NULL", stored)
			}
			return
		}
		got, err = raws.decodeResult(stored.([]byte))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("result round trip: %v", err)
		}
		raws.decodeResult(b)
		// The fast path reads what the decoder reads.
		if note, ok := resultNoteFast(b); ok {
			var want any
			if note != "" {
				want = note
			}
			if got := resultNoteDecoded(b); got != want && json.Valid(b) {
				t.Fatalf("resultNote of %q: fast %v, decoder %v", b, want, got)
			}
		}
		// Every shortcut reads what the decoder reads.
		if b[0] == '{' && json.Valid(b) {
			if got, want := resultNote(b), resultNoteDecoded(b); got != want {
				t.Fatalf("resultNote of %q: %v, decoder %v", b, got, want)
			}
		}
	})
}

// TestStoredResult: the parse result is stored compressed and read back
// exactly; a result stored before compression (JSON) reads as before; a
// damaged one is an error; the note goes to its own column, and search
// finds a message by the note of its compressed result.
func TestStoredResult(t *testing.T) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	result := goldenResult(t)
	in := &Incoming{Direction: DirIn, MessageID: "r@x.test", Sender: "a@x.test", Recipients: []string{"b@x.test"},
		Raw: []byte("Subject: ACCEPT | 30 USDC sent\r\n\r\n{}\r\n"), Status: StatusAccepted, ReceivedAt: time.Now(),
		Subject: "ACCEPT | 30 USDC sent", Result: result}
	out, err := s.Ingest(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	var note *string
	if err := s.rdb.QueryRowContext(ctx, `SELECT result, note FROM messages WHERE id = ?`, out.ID).Scan(&stored, &note); err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || stored[0] != resultS2Tag || len(stored) >= len(result) {
		t.Errorf("stored result: %d bytes from %d, want a smaller S2 block over the result dictionary", len(stored), len(result))
	}
	if note == nil || *note != "30 USDC sent" {
		t.Errorf("note column %v, want \"30 USDC sent\"", note)
	}
	m, err := s.Message(ctx, out.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Result, result) {
		t.Errorf("Message result:\n%s\nwant\n%s", m.Result, result)
	}

	// Written before compression: the JSON itself, no note column.
	if err := s.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(`UPDATE messages SET result = ?, note = NULL WHERE id = ?`, result, out.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Message(ctx, out.ID); err != nil || !bytes.Equal(m.Result, result) {
		t.Errorf("old row: %v, result %s", err, m.Result)
	}
	// Damaged: an error, not wrong JSON.
	if err := s.write(ctx, func(tx *wtx) error {
		_, err := tx.Exec(`UPDATE messages SET result = x'28b52ffd0000ffff' WHERE id = ?`, out.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Message(ctx, out.ID); err == nil {
		t.Error("damaged result read without an error")
	}
}

// TestResultNote: the note column gets the result's top-level note only.
func TestResultNote(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want any
	}{
		{`{"type":"pay","note":"for order 7","body":{"note":"inner"}}`, "for order 7"},
		{`{"type":null,"note":"caf\u00e9 \"x\"","valid":true}`, "café \"x\""},
		{`{"type":"p\"ay","note":"q"}`, "q"},
		{`{"type":"pay","note":"unterminated`, nil},
		{`{"type":"pay","note":"a\u12"}`, nil},
		{`{"body":{"note":"inner"},"type":"pay","note":"late"}`, "late"},
		{`{"type":"pay","note":""}`, nil},
		{`{"type":"pay","note":null}`, nil},
		{`{"type":"pay"}`, nil},
		{`{"type":"pay","valid":true,"body":{"v":"0.2.0"}}`, nil},
		{`{"valid":true,"no\u0074e":"escaped key"}`, "escaped key"},
		{`{"valid":true,"note":"not second"}`, "not second"},
		{`{"type":"pay","note":7}`, nil},
		{`{"type":`, nil},
		{`["note","x"]`, nil},
		{``, nil},
	} {
		if got := resultNote([]byte(c.in)); got != c.want {
			t.Errorf("resultNote(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestDictionariesFixed: the dictionaries are part of the stored format
// (codecdict/README.md); changing one's bytes would make every frame or
// block stored over it unreadable.
func TestDictionariesFixed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file string
		dict []byte
		want string
	}{
		{"codecdict/result.json", dictResult, "3de412da95ee848674f73c3378d6b2f83a16e913894760ebb17cdc36da40dfbd"},
		{"codecdict/mail.raw", dictMail, "c3d2e17c4864bb5fee411a683c9d8738029e394feffa2fbe8987a28d613726ec"},
	} {
		if got := fmt.Sprintf("%x", sha256.Sum256(c.dict)); got != c.want {
			t.Errorf("%s SHA-256 %s, want %s: add a new dictionary with a new id instead", c.file, got, c.want)
		}
	}
}

// TestResultFramesWrittenBefore: results stored before the result frames
// left their literals raw (Huffman-coded literals, the same dictionary)
// read back exactly, and the frames written now are smaller than the
// JSON and read back exactly too.
func TestResultFramesWrittenBefore(t *testing.T) {
	t.Parallel()
	before, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true), zstd.WithEncoderDictRaw(dictResultID, dictResult))
	if err != nil {
		t.Fatal(err)
	}
	// A note of prose leaves literals enough for a Huffman table.
	result := bytes.Replace(goldenResult(t), []byte(`"note":"30 USDC sent"`),
		[]byte(`"note":"30 USDC sent for the blue kettle, order 4471; quickly wrap it with brown paper, and ship Friday via Zurich"`), 1)
	if !bytes.Contains(result, []byte("kettle")) {
		t.Fatal("accept.golden.json's note changed: the test's result has no prose")
	}
	old := before.EncodeAll(result, nil)
	now := raws.encodeResult(result).([]byte)
	if bytes.Equal(old, now) {
		t.Fatal("the frame written now is the frame written before: the test compares nothing")
	}
	for name, frame := range map[string][]byte{"before": old, "now": now} {
		if len(frame) >= len(result) {
			t.Errorf("%s: %d-byte frame for %d bytes of JSON", name, len(frame), len(result))
		}
		got, err := raws.decodeResult(frame)
		if err != nil || !bytes.Equal(got, result) {
			t.Errorf("%s: read back %v:\n%s\nwant\n%s", name, err, got, result)
		}
	}
}

// TestRawFrameLiterals: mail from rawPlainFrom up to rawPlainTo is
// stored as an S2 block, smaller and larger mail in a Zstandard frame
// with Huffman-coded literals; every one reads back exactly.
func TestRawFrameLiterals(t *testing.T) {
	t.Parallel()
	text := func(n int) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < n; i++ {
			fmt.Fprintf(&b, "Line %d of the quoted conversation: when does order %d ship? =E2=82=AC%d\r\n", i, i*7919%1000, i%97)
		}
		return b.Bytes()[:n]
	}
	for _, c := range []struct {
		size  int
		plain bool
	}{
		{600, false}, {rawPlainFrom - 1, false}, {rawPlainFrom, true}, {2500, true},
		{rawPlainTo - 1, true}, {rawPlainTo, false}, {200 << 10, false},
	} {
		raw := text(c.size)
		z, codec := raws.encode(raw)
		want, wantCodec := raws.enc.EncodeAll(raw, nil), codecZstd
		if c.plain {
			want, wantCodec = s2.Encode(nil, raw), codecS2
		}
		if codec != wantCodec || !bytes.Equal(z, want) {
			t.Errorf("%d bytes: codec %d, %d bytes; want codec %d, %d bytes", c.size, codec, len(z), wantCodec, len(want))
			continue
		}
		if got, err := raws.decode(z, int64(codec)); err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%d bytes: read back %v, %d bytes", c.size, err, len(got))
		}
	}
}

// TestRawS2Bounded: an S2 block that says it decodes to more than
// maxRawDecoded bytes, or is damaged, is a typed error, not a panic or
// an allocation of that size.
func TestRawS2Bounded(t *testing.T) {
	t.Parallel()
	huge := binary.AppendUvarint(nil, maxRawDecoded+1)
	good := s2.Encode(nil, bytes.Repeat([]byte("Subject: hello\r\n"), 100))
	for name, b := range map[string][]byte{
		"over the bound": append(huge, 0),
		"truncated":      good[:len(good)/2],
		"empty":          nil,
	} {
		if _, err := raws.decode(b, codecS2); !errors.Is(err, errRawCodec) {
			t.Errorf("%s: %v, want errRawCodec", name, err)
		}
	}
}

// TestResultS2Dictionary: a result of any size is stored as
// resultS2Tag and an S2 block over the result dictionary, smaller than
// the block without it; results in the Zstandard frames written before
// (over the dictionary or without it, literals coded or as they are)
// read back exactly too.
func TestResultS2Dictionary(t *testing.T) {
	t.Parallel()
	result := func(n int) []byte {
		b := []byte(`{"type":null,"note":"","valid":false,"errors":[],"warnings":[],"subject":"`)
		for i := 0; len(b) < n-2; i++ {
			b = append(b, fmt.Sprintf("order %d ships Friday; ", i)...)
		}
		return append(b[:n-2], `"}`...)
	}
	frame := func(o ...zstd.EOption) *zstd.Encoder {
		e, err := zstd.NewWriter(nil, append([]zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true)}, o...)...)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	before := map[string]*zstd.Encoder{
		"dict, plain literals":    frame(zstd.WithEncoderDictRaw(dictResultID, dictResult), zstd.WithNoEntropyCompression(true)),
		"no dict, coded literals": frame(),
		"no dict, plain literals": frame(zstd.WithNoEntropyCompression(true)),
	}
	for _, size := range []int{100, 300, 768, 769, 4000, 100 << 10, 5 << 20} {
		j := result(size)
		stored := raws.encodeResult(j).([]byte)
		if stored[0] != resultS2Tag {
			t.Errorf("%d bytes: stored starting %#x, want resultS2Tag", size, stored[0])
		}
		if plain := s2.Encode(nil, j); len(stored)-1 >= len(plain) {
			t.Errorf("%d bytes: %d bytes over the dictionary, %d without it", size, len(stored)-1, len(plain))
		}
		if got, err := raws.decodeResult(stored); err != nil || !bytes.Equal(got, j) {
			t.Errorf("%d bytes: read back %v", size, err)
		}
		for name, e := range before {
			if got, err := raws.decodeResult(e.EncodeAll(j, nil)); err != nil || !bytes.Equal(got, j) {
				t.Errorf("%d bytes, frame written before (%s): read back %v", size, name, err)
			}
		}
	}
	// Bytes that start like a stored S2 result are stored compressed,
	// and a damaged or oversized block is an error.
	odd := append([]byte{resultS2Tag}, "x"...)
	if got, err := raws.decodeResult(raws.encodeResult(odd).([]byte)); err != nil || !bytes.Equal(got, odd) {
		t.Errorf("tag-first bytes: read back %q, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"over the bound": append(append([]byte{resultS2Tag}, binary.AppendUvarint(nil, maxRawDecoded+1)...), 0),
		"truncated":      raws.encodeResult(result(2000)).([]byte)[:20],
		"tag alone":      {resultS2Tag},
	} {
		if _, err := raws.decodeResult(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// goldenResult is the parse result of testdata/eml/accept.eml as the
// message model writes it (compact JSON).
func goldenResult(t *testing.T) []byte {
	t.Helper()
	golden, err := os.ReadFile(filepath.Join("..", "testdata", "eml", "accept.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, golden); err != nil {
		t.Fatal(err)
	}
	return compact.Bytes()
}
