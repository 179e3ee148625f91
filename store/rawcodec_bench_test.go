package store_test

import (
	"bytes"
	"compress/flate"
	"fmt"
	"strconv"
	"testing"

	"github.com/envelopd/envelopd/store"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkRawCodecs compares, on real-shaped mail of 2.5 KB and 600
// bytes, the compressors the store could use for raw bytes: stored
// bytes per raw byte (out/in), per mail, and the CPU of compressing
// one mail (cpu-µs/mail, ns/op) — the choice made in rawcodec.go is zstd-fastest — and the
// store's codec with and without the mail dictionary (rawdict.go), also
// on the testdata corpus (which the dictionary was made from: a held-out
// figure is in docs/performance.md).
func BenchmarkRawCodecs(b *testing.B) {
	zf, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true))
	zd, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true))
	// The flate writers are reused (Reset), as a store would pool them.
	f1, _ := flate.NewWriter(nil, 1)
	f6, _ := flate.NewWriter(nil, 6)
	codecs := map[string]func([]byte) []byte{
		"zstd-fastest": func(m []byte) []byte { return zf.EncodeAll(m, nil) },
		"zstd-default": func(m []byte) []byte { return zd.EncodeAll(m, nil) },
		"flate-1":      flateWith(f1),
		"flate-6":      flateWith(f6),
		// The store's own codec: without a dictionary (SQLite, and mail
		// over rawDictMax) and over the mail dictionary (Postgres).
		"store":          func(m []byte) []byte { z, _ := store.EncodeRaw(m); return z },
		"store-maildict": func(m []byte) []byte { z, _ := store.EncodeRawDict(m); return z },
	}
	names := []string{"zstd-fastest", "zstd-default", "flate-1", "flate-6", "store", "store-maildict"}
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
