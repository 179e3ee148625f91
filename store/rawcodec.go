package store

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Raw bytes are stored compressed (message_raw.codec): a received mail
// is mostly text (headers, quoted-printable, base64), which Zstandard
// (RFC 8878) shrinks well and fast. Readers get the bytes exactly as
// received: decoding is in the store, under every read of a message's
// raw bytes.
//
// The stored parse result (messages.result) is compressed too. A result
// shares little with itself but much with every other result (its keys,
// its error messages), so it is compressed over a raw-content dictionary
// of that shape (codecdict/result.json, results of the testdata corpus):
// as an S2 block over it (resultS2Tag), or, in rows written before, as
// a Zstandard frame over it (RFC 8878 §5, "Dictionary Format") or with
// no dictionary. A dictionary is part of the stored format: once
// released it never changes; another one gets another id or tag.
// Raw mail is compressed without one, except small mail on a backend
// that asks for it (rawdict.go): starting each frame from a dictionary
// costs a copy of the encoder's tables, which the few bytes it saves on
// mail do not pay for where the bytes are not short (docs/performance.md).

// Codecs of message_raw.raw.
const (
	codecNone = 0 // the bytes as received (rows from before compression, and mail that does not shrink)
	codecZstd = 1 // one Zstandard frame (RFC 8878) holding the bytes
	codecS2   = 2 // one S2 block (klauspost/compress/s2, a superset of the Snappy block format) holding the bytes
)

// dictResultID is the result dictionary's id, written in the frames'
// headers (RFC 8878 §3.1.1.1.3; ids below 32,768 are reserved for
// registered dictionaries, this one is private to the store).
const dictResultID = 0x656e7602

//go:embed codecdict/result.json
var dictResult []byte

// zstdMagic starts every Zstandard frame (RFC 8878 §3.1.1); a stored
// result that starts with it is compressed, one that starts with '{' is
// JSON as written before results were compressed.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// rawFrameMin is the size from which raw mail is stored as a frame;
// smaller mail is stored as received. A frame of very little mail saves
// nothing (the frame header and block header cost ≈ 10 bytes); above
// that, the frame's CPU against the bytes it saves is weighed in
// docs/performance.md (BenchmarkRawCodecs, BenchmarkFootprint).
const rawFrameMin = 64

// Which raw mail is stored as an S2 block (codecS2) rather than a
// Zstandard frame. Both find LZ77 matches; a Zstandard frame then codes
// its sequences with FSE tables built for it and, at the cost of about as
// much CPU again, its literals with a Huffman table (RFC 8878 §4.2),
// which saves ≈ 20 % of the literals' bytes. An S2 block leaves the
// literals as they are and writes its matches without tables: on mail
// it takes well under half the CPU of a frame with plain literals for
// about as many bytes (BenchmarkRawCodecs, docs/performance.md). Small
// mail needs the Huffman table's bytes (its row and indexes already
// cost more than the mail: the footprint goal of 2× the raw bytes at
// 600 bytes), and large mail is mostly its own bytes (attachments),
// which the frame codes better; mail from rawPlainFrom up to rawPlainTo
// is stored as an S2 block. Every codec is read alike; an empty range
// (rawPlainFrom = rawPlainTo) stores every mail in a frame.
const (
	rawPlainFrom = 1 << 10
	rawPlainTo   = 64 << 10
)

// resultS2Tag starts a stored result that is an S2 block over the
// result dictionary (resultS2Dict). It is not a byte a JSON text can
// start with (RFC 8259 §2; in UTF-8 it only continues a character), nor
// the first of zstdMagic. An S2 block over the dictionary costs a result
// a fifth of the CPU of a Zstandard frame over it, for fewer bytes: the
// frame's encoder restores its 256 KiB match table from the
// dictionary's for every frame, S2's reads the dictionary's table and
// clears a 64 KiB one (BenchmarkResultFrames, docs/performance.md).
const resultS2Tag = 0xb2

// resultS2Dict is the result dictionary as S2 reads it: its bytes, the
// first repeat offset at their start. Part of the stored format.
var resultS2Dict = s2.MakeDictManual(dictResult, 0)

// maxRawDecoded bounds what decoding one stored blob may produce: a
// damaged row cannot make a read allocate without bound.
const maxRawDecoded = 1 << 30

// rawCodec compresses and decompresses raw bytes and results; its
// encoders and decoder are safe for concurrent use (EncodeAll,
// DecodeAll) and hold no state between calls.
type rawCodec struct {
	enc     *zstd.Encoder // raw bytes outside rawPlainFrom…rawPlainTo, literals Huffman-coded
	encMail *zstd.Encoder // small raw mail, over the mail dictionary (rawdict.go)
	dec     *zstd.Decoder // every frame: raw bytes, and results written before resultS2Tag
}

// raws is the store's codec: stateless between calls, shared by every
// store of the process so that its buffers are allocated once.
var raws = newRawCodec()

func newRawCodec() *rawCodec {
	// SpeedFastest: the levels and compress/flate are compared on mail
	// by BenchmarkRawCodecs (figures in docs/performance.md). The frames
	// carry no content checksum (RFC 8878 §3.1.1.1.1.3,
	// Content_Checksum_Flag): hashing every byte is CPU on every ingest
	// for a check the bytes as received never had (they were stored
	// without one before they were compressed); the decoder reads frames
	// with and without one alike.
	opts := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false)}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		panic(err) // constant options
	}
	// Results written before resultS2Tag are Zstandard frames over the
	// result dictionary (dictResultID) or without one.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRawDecoded),
		zstd.WithDecoderDictRaw(dictResultID, dictResult), zstd.WithDecoderDictRaw(dictMailID, dictMail))
	if err != nil {
		panic(err)
	}
	return &rawCodec{enc: enc, encMail: newMailEncoder(opts), dec: dec}
}

// encode returns what to store for raw and its codec: the compressed
// frame or S2 block when it is smaller, else raw itself.
func (c *rawCodec) encode(raw []byte) ([]byte, int) {
	if len(raw) < rawFrameMin {
		return raw, codecNone
	}
	return c.encodeTo(make([]byte, 0, len(raw)/2), raw)
}

// encodeTo is encode writing over dst's bytes (dst[:0]), for a caller
// that reuses its buffer; the bytes are the same whatever dst.
func (c *rawCodec) encodeTo(dst, raw []byte) ([]byte, int) {
	if len(raw) < rawFrameMin {
		return raw, codecNone
	}
	if len(raw) >= rawPlainFrom && len(raw) < rawPlainTo {
		if n := s2.MaxEncodedLen(len(raw)); n > 0 && cap(dst) >= n {
			dst = dst[:n]
		} else {
			dst = nil
		}
		z := s2.Encode(dst, raw)
		if len(z) >= len(raw) {
			return raw, codecNone
		}
		return z, codecS2
	}
	z := c.enc.EncodeAll(raw, dst[:0])
	if len(z) >= len(raw) {
		return raw, codecNone
	}
	return z, codecZstd
}

// errRawCodec is a stored blob that cannot be decoded.
var errRawCodec = errors.New("store: raw bytes: cannot decode")

// decode returns the bytes as received of a stored blob.
func (c *rawCodec) decode(b []byte, codec int64) ([]byte, error) {
	switch codec {
	case codecNone:
		return b, nil
	case codecZstd:
		out, err := c.dec.DecodeAll(b, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errRawCodec, err)
		}
		return out, nil
	case codecS2:
		out, err := decodeS2(b, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errRawCodec, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: codec %d", errRawCodec, codec)
}

// encodeResult returns what to store in messages.result for a parse
// result (JSON): resultS2Tag and an S2 block over the result dictionary
// when that is smaller, else the JSON itself; nil stays nil (SQL NULL).
// Bytes that start like a compressed result are always stored
// compressed, so that decodeResult cannot mistake them for one.
func (c *rawCodec) encodeResult(j []byte) any {
	if len(j) == 0 {
		return nil
	}
	n := s2.MaxEncodedLen(len(j))
	if n < 0 {
		return j // beyond S2's block size: as received, as before compression
	}
	buf := make([]byte, 1+n)
	buf[0] = resultS2Tag
	z := buf[:1+len(resultS2Dict.Encode(buf[1:], j))]
	if len(z) >= len(j) && j[0] != resultS2Tag && !bytes.HasPrefix(j, zstdMagic) {
		return j
	}
	return z
}

// decodeS2 decodes an S2 block, over dict when it is not nil. A block
// that says it holds more than maxRawDecoded bytes is refused before
// anything is allocated for it.
func decodeS2(b []byte, dict *s2.Dict) ([]byte, error) {
	n, err := s2.DecodedLen(b)
	if err != nil || n > maxRawDecoded {
		return nil, fmt.Errorf("S2 block of %d bytes: %v", n, err)
	}
	if dict != nil {
		return dict.Decode(nil, b)
	}
	return s2.Decode(nil, b)
}

// decodeResult returns the JSON of a stored messages.result.
func (c *rawCodec) decodeResult(b []byte) ([]byte, error) {
	if len(b) > 0 && b[0] == resultS2Tag {
		out, err := decodeS2(b[1:], resultS2Dict)
		if err != nil {
			return nil, fmt.Errorf("store: result: cannot decode: %v", err)
		}
		return out, nil
	}
	if !bytes.HasPrefix(b, zstdMagic) {
		return b, nil
	}
	out, err := c.dec.DecodeAll(b, nil)
	if err != nil {
		return nil, fmt.Errorf("store: result: cannot decode: %v", err)
	}
	return out, nil
}

// resultNote returns the top-level "note" of a parse result (JSON) for
// messages.note, or nil when it has none, it is empty or the result is
// not a JSON object. parse.Result writes "type" then "note" first, which
// is read without a decoder; any other shape is read token by token up
// to the note, so the rest of a large result is not scanned.
func resultNote(j []byte) any {
	if len(j) == 0 || j[0] != '{' {
		return nil
	}
	if note, ok := resultNoteFast(j); ok {
		if note == "" {
			return nil
		}
		return note
	}
	if !bytes.Contains(j, []byte(`"note"`)) && bytes.IndexByte(j, '\\') < 0 {
		// A key is "note" only written so, or with an escape in it.
		return nil
	}
	return resultNoteDecoded(j)
}

// resultNoteDecoded is resultNote for a result of any shape.
func resultNoteDecoded(j []byte) any {
	d := json.NewDecoder(bytes.NewReader(j))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil
		}
		if k != "note" {
			var skip json.RawMessage
			if d.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		var note string
		if d.Decode(&note) != nil || note == "" {
			return nil
		}
		return note
	}
	return nil
}

// resultNoteFast reads the note of a result that starts as parse.Result
// writes it: {"type":null or a string,"note":a string. ok is false for
// any other start.
func resultNoteFast(j []byte) (note string, ok bool) {
	rest, found := bytes.CutPrefix(j, []byte(`{"type":`))
	if !found {
		return "", false
	}
	if r, isNull := bytes.CutPrefix(rest, []byte("null")); isNull {
		rest = r
	} else if _, r, ok := jsonString(rest); ok {
		rest = r
	} else {
		return "", false
	}
	if rest, found = bytes.CutPrefix(rest, []byte(`,"note":`)); !found {
		return "", false
	}
	s, _, ok := jsonString(rest)
	if !ok {
		return "", false
	}
	if plainJSONString(s[1 : len(s)-1]) {
		return string(s[1 : len(s)-1]), true
	}
	var v string
	if json.Unmarshal(s, &v) != nil {
		return "", false
	}
	return v, true
}

// plainJSONString reports whether the inside of a JSON string reads as
// itself: no escape, no control character (which a decoder refuses,
// RFC 8259 §7) and valid UTF-8 (which a decoder would replace by U+FFFD).
func plainJSONString(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c == '\\' || c < 0x20 {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii || utf8.Valid(b)
}

// jsonString splits a JSON string (quotes included) off the front of b.
func jsonString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return nil, nil, false
		}
		i += q
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		esc := 0
		for k := i - 1; k >= 1 && b[k] == '\\'; k-- {
			esc++
		}
		if esc%2 == 0 {
			return b[:i+1], b[i+1:], true
		}
		i++
	}
	return nil, nil, false
}
