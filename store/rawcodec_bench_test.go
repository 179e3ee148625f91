package store_test

import (
	"bytes"
	"compress/flate"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkRawCodecs compares, on real-shaped mail of 2.5 KB and 600
// bytes, the compressors the store could use for raw bytes: stored
// bytes per raw byte (out/in) and the CPU of compressing one mail
// (ns/op) — the choice made in rawcodec.go is zstd-fastest.
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
	}
	for _, size := range []int{2500, 600} {
		mails := make([][]byte, 1000)
		for i := range mails {
			mails[i] = footprintMail(i, size)
		}
		for _, name := range []string{"zstd-fastest", "zstd-default", "flate-1", "flate-6"} {
			enc := codecs[name]
			b.Run(fmt.Sprintf("%d/%s", size, name), func(b *testing.B) {
				var in, out int
				for i := range b.N {
					m := mails[i%len(mails)]
					in += len(m)
					out += len(enc(m))
				}
				b.ReportMetric(float64(out)/float64(in), "out/in")
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
