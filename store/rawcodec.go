package store

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Raw bytes are stored compressed (message_raw.codec): a received mail
// is mostly text (headers, quoted-printable, base64), which Zstandard
// (RFC 8878) shrinks well and fast. Readers get the bytes exactly as
// received: decoding is in the store, under every read of a message's
// raw bytes.

// Codecs of message_raw.raw.
const (
	codecNone = 0 // the bytes as received (rows from before compression, and mail that does not shrink)
	codecZstd = 1 // one Zstandard frame (RFC 8878) holding the bytes
)

// maxRawDecoded bounds what decoding one stored blob may produce: a
// damaged row cannot make a read allocate without bound.
const maxRawDecoded = 1 << 30

// rawCodec compresses and decompresses raw bytes; its encoder and
// decoder are safe for concurrent use (EncodeAll, DecodeAll) and hold no
// state between calls.
type rawCodec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// raws is the store's raw codec: stateless between calls, shared by
// every store of the process so that its buffers are allocated once.
var raws = func() *rawCodec {
	// SpeedFastest: the levels and compress/flate are compared on mail
	// by BenchmarkRawCodecs (figures in docs/performance.md).
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true))
	if err != nil {
		panic(err) // constant options
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRawDecoded))
	if err != nil {
		panic(err)
	}
	return &rawCodec{enc: enc, dec: dec}
}()

// encode returns what to store for raw and its codec: the compressed
// frame when it is smaller, else raw itself.
func (c *rawCodec) encode(raw []byte) ([]byte, int) {
	if len(raw) < 64 {
		return raw, codecNone
	}
	z := c.enc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
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
	}
	return nil, fmt.Errorf("%w: codec %d", errRawCodec, codec)
}
