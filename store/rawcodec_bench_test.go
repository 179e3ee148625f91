package store_test

import (
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkRawCodecs compares, on real-shaped mail of 2.5 KB and 600
// bytes, the compressors the store could use for raw bytes: stored
// bytes per raw byte (out/in), per mail, and the CPU of compressing
// one mail (cpu-µs/mail, ns/op) — the choice made in rawcodec.go is
// zstd-fastest below rawPlainFrom and S2 from there to rawPlainTo — and
// the store's codec with and without the mail dictionary (rawdict.go),
// also on the testdata corpus (which the dictionary was made from: a
// held-out figure is in docs/performance.md).
func BenchmarkRawCodecs(b *testing.B) {
	zf, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true))
	zd, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true))
	zp, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true), zstd.WithNoEntropyCompression(true))
	// The flate writers are reused (Reset), as a store would pool them.
	f1, _ := flate.NewWriter(nil, 1)
	f6, _ := flate.NewWriter(nil, 6)
	codecs := map[string]func([]byte) []byte{
		"zstd-fastest":                func(m []byte) []byte { return zf.EncodeAll(m, nil) },
		"zstd-default":                func(m []byte) []byte { return zd.EncodeAll(m, nil) },
		"zstd-fastest-plain-literals": func(m []byte) []byte { return zp.EncodeAll(m, nil) },
		"flate-1":                     flateWith(f1),
		"flate-6":                     flateWith(f6),
		"s2":                          func(m []byte) []byte { return s2.Encode(nil, m) },
		"s2-better":                   func(m []byte) []byte { return s2.EncodeBetter(nil, m) },
		// The store's own codec: without a dictionary (SQLite, and mail
		// over rawDictMax) and over the mail dictionary (Postgres).
		"store":          func(m []byte) []byte { z, _ := store.EncodeRaw(m); return z },
		"store-maildict": func(m []byte) []byte { z, _ := store.EncodeRawDict(m); return z },
	}
	names := []string{"zstd-fastest", "zstd-fastest-plain-literals", "zstd-default", "flate-1", "flate-6", "s2", "s2-better", "store", "store-maildict"}
	for _, size := range []string{"2500", "600", "corpus"} {
		mails := store.CorpusMail(b)
		if size != "corpus" {
			n, _ := strconv.Atoi(size)
			mails = make([][]byte, 1000)
			for i := range mails {
				mails[i] = footprintMail(i, n)
			}
		}
		for _, name := range names {
			enc := codecs[name]
			b.Run(fmt.Sprintf("%s/%s", size, name), func(b *testing.B) {
				var in, out int
				cpu := cpuNow()
				for i := range b.N {
					m := mails[i%len(mails)]
					in += len(m)
					out += len(enc(m))
				}
				b.ReportMetric(float64(out)/float64(in), "out/in")
				b.ReportMetric(float64(out)/float64(b.N), "out-B/mail")
				b.ReportMetric(float64((cpuNow()-cpu).Nanoseconds())/1000/float64(b.N), "cpu-µs/mail")
			})
		}
	}
}

// flateWith compresses with w, reset for each mail.
func flateWith(w *flate.Writer) func([]byte) []byte {
	return func(m []byte) []byte {
		var buf bytes.Buffer
		w.Reset(&buf)
		w.Write(m)
		w.Close()
		return buf.Bytes()
	}
}

// BenchmarkResultFrames compares, on the parse results of the
// real-shaped mail of 2.5 KB and 600 bytes (as the message model writes
// them), the result frames over the result dictionary with Huffman-coded
// literals (entropy) and with the literals as they are (raw-literals,
// the store's choice), and without the dictionary: stored bytes per
// result (out-B) and the CPU of one frame (ns/op).
func BenchmarkResultFrames(b *testing.B) {
	dict, err := os.ReadFile(filepath.Join("codecdict", "result.json"))
	if err != nil {
		b.Fatal(err)
	}
	const dictID = 0x656e7602 // rawcodec.go's dictResultID
	opts := func(o ...zstd.EOption) *zstd.Encoder {
		e, err := zstd.NewWriter(nil, append([]zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true)}, o...)...)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	encs := []struct {
		name string
		enc  *zstd.Encoder
	}{
		{"dict-raw-literals", opts(zstd.WithEncoderDictRaw(dictID, dict), zstd.WithNoEntropyCompression(true))},
		{"dict-entropy", opts(zstd.WithEncoderDictRaw(dictID, dict))},
		{"no-dict", opts()},
		{"no-dict-raw-literals", opts(zstd.WithNoEntropyCompression(true))},
	}
	ctx := context.Background()
	for _, size := range []int{2500, 600} {
		results := make([][]byte, 500)
		for i := range results {
			m := footprintMail(i, size)
			results[i] = message.Incoming(message.Analyze(ctx, m, message.AnalyzeOptions{}), m, store.DirIn).Result
		}
		for _, e := range encs {
			b.Run(fmt.Sprintf("%d/%s", size, e.name), func(b *testing.B) {
				var in, out int
				dst := make([]byte, 0, 8192)
				for i := range b.N {
					r := results[i%len(results)]
					in += len(r)
					out += len(e.enc.EncodeAll(r, dst[:0]))
				}
				b.ReportMetric(float64(in)/float64(b.N), "in-B")
				b.ReportMetric(float64(out)/float64(b.N), "out-B")
			})
		}
		sd := s2.MakeDict(dict, nil)
		for _, name := range []string{"s2-dict", "s2-no-dict"} {
			b.Run(fmt.Sprintf("%d/%s", size, name), func(b *testing.B) {
				var in, out int
				dst := make([]byte, 8192)
				for i := range b.N {
					r := results[i%len(results)]
					in += len(r)
					if name == "s2-dict" {
						out += len(sd.Encode(dst, r))
					} else {
						out += len(s2.Encode(dst, r))
					}
				}
				b.ReportMetric(float64(in)/float64(b.N), "in-B")
				b.ReportMetric(float64(out)/float64(b.N), "out-B")
			})
		}
	}
}
