package store

import (
	_ "embed"

	"github.com/klauspost/compress/zstd"
)

// Small raw mail compressed over a dictionary of mail.
//
// A mail of a few hundred bytes is mostly its header fields and MIME
// boilerplate (Content-Type, Content-Transfer-Encoding, boundaries,
// charset parameters), which a frame of its own sees once and so cannot
// shrink much. A frame that starts from a raw-content dictionary of
// those lines (RFC 8878 §5, codecdict/mail.raw, made as
// codecdict/README.md says) refers to them instead. The dictionary costs
// CPU on every frame (the encoder restores its match table from the
// dictionary's), so it is used only where a backend's stored bytes ask
// for it (dialect.rawDict) and only for mail up to rawDictMax bytes,
// where the bytes it saves are a share of the mail worth its CPU
// (figures in docs/performance.md). Every frame names its dictionary in
// its header (RFC 8878 §3.1.1.1.3), and the one decoder knows each
// dictionary, so message_raw.codec stays codecZstd and every backend
// reads every frame.

// dictMailID is the mail dictionary's id, written in the frames' headers:
// two bytes (ids below 65,536; those below 32,768 are reserved for
// registered dictionaries, this one is private to the store).
const dictMailID = 0x8001

//go:embed codecdict/mail.raw
var dictMail []byte

// rawDictMax is the largest raw mail compressed over the mail
// dictionary.
const rawDictMax = 2048

// newMailEncoder is the raw encoder over the mail dictionary, with the
// options of the encoder without one.
func newMailEncoder(opts []zstd.EOption) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, append(opts[:len(opts):len(opts)], zstd.WithEncoderDictRaw(dictMailID, dictMail))...)
	if err != nil {
		panic(err) // constant options and dictionary
	}
	return enc
}

// encodeRaw is encode for a backend: over the mail dictionary when dict
// is set and the mail is small enough for it to pay.
func (c *rawCodec) encodeRaw(raw []byte, dict bool) ([]byte, int) {
	if !dict || len(raw) > rawDictMax || len(raw) < rawFrameMin {
		return c.encode(raw)
	}
	z := c.encMail.EncodeAll(raw, make([]byte, 0, len(raw)/2))
	if len(z) >= len(raw) {
		return raw, codecNone
	}
	return z, codecZstd
}
