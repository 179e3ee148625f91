package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"syscall"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"
)

var _ = base64.StdEncoding

func crlf(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

func cpu() time.Duration {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func measure(name string, enc *zstd.Encoder, mails [][]byte, reps int) {
	in, out := 0, 0
	for _, m := range mails {
		in += len(m)
		z := enc.EncodeAll(m, nil)
		if len(z) < len(m) { out += len(z) } else { out += len(m) }
	}
	dst := make([]byte, 0, 8192)
	t := cpu()
	n := 0
	for r := 0; r < reps; r++ {
		for _, m := range mails {
			dst = enc.EncodeAll(m, dst[:0]); n++
		}
	}
	el := cpu() - t
	fmt.Printf("%-28s in %7.1f out %7.1f ratio %.3f  %.2f cpu-us/frame\n", name, float64(in)/float64(len(mails)), float64(out)/float64(len(mails)), float64(out)/float64(in), float64(el.Nanoseconds())/1000/float64(n))
}

var minDF = 2

func lineDict(mails [][]byte, minDF, max int) []byte {
	df := map[string]int{}
	for _, m := range mails {
		seen := map[string]bool{}
		for _, l := range strings.SplitAfter(string(m), "\r\n") {
			if len(l) < 8 || seen[l] { continue }
			seen[l] = true
			df[l]++
		}
	}
	type kv struct{ l string; n int }
	var ls []kv
	for l, n := range df { if n >= minDF { ls = append(ls, kv{l, n}) } }
	// most frequent last; ties by line
	sort.Slice(ls, func(i, j int) bool { if ls[i].n != ls[j].n { return ls[i].n < ls[j].n }; return ls[i].l < ls[j].l })
	total := 0
	for _, x := range ls { total += len(x.l) }
	for total > max { total -= len(ls[0].l); ls = ls[1:] }
	var b []byte
	for _, x := range ls { b = append(b, x.l...) }
	return b
}

func main() {
	if v := os.Getenv("MINDF"); v != "" { fmt.Sscan(v, &minDF) }
	var files []string
	filepath.Walk("testdata", func(p string, fi os.FileInfo, err error) error {
		if strings.HasSuffix(p, ".eml") { files = append(files, p) }
		return nil
	})
	sort.Strings(files)
	var train, test [][]byte
	for i, f := range files {
		b, _ := os.ReadFile(f)
		b = crlf(b)
		if i%2 == 0 { train = append(train, b) } else { test = append(test, b) }
	}
	fp600, fp2500 := make([][]byte, 500), make([][]byte, 500)
	for i := range fp600 { fp600[i] = footprintMail(i, 600); fp2500[i] = footprintMail(i, 2500) }
	opts := []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true)}
	plain, _ := zstd.NewWriter(nil, opts...)
	sets := []struct{ n string; m [][]byte }{{"fp600", fp600}, {"fp2500", fp2500}, {"corpus-test", test}, {"corpus-train", train}}
	for _, s := range sets { measure(s.n+"/none", plain, s.m, 2) }
	all := append(append([][]byte{}, train...), test...)
	build := func(in [][]byte) []byte { return lineDict(in, minDF, 16384) }
	_ = dict.BuildRawDict
	dAll := build(all)
	os.WriteFile("/tmp/rawdict-all.txt", dAll, 0o644)
	e, _ := zstd.NewWriter(nil, append(opts, zstd.WithEncoderDictRaw(0xe703, dAll))...)
	for _, s := range sets { measure(fmt.Sprintf("%s/all(%d)", s.n, len(dAll)), e, s.m, 2) }
	dTr := build(train)
	e1, _ := zstd.NewWriter(nil, append(opts, zstd.WithEncoderDictRaw(0xe703, dTr))...)
	measure("test/by-train", e1, test, 2)
	dTe := build(test)
	e2, _ := zstd.NewWriter(nil, append(opts, zstd.WithEncoderDictRaw(0xe703, dTe))...)
	measure("train/by-test", e2, train, 2)
	nocrc, _ := zstd.NewWriter(nil, append(opts, zstd.WithEncoderDictRaw(0xe703, dAll), zstd.WithEncoderCRC(false))...)
	measure("fp600/all-nocrc", nocrc, fp600, 2)
	for _, size := range []int{300, 600, 1000, 1500, 2500, 4000, 8000, 16000, 32000} {
		ms := make([][]byte, 300)
		for i := range ms { ms[i] = footprintMail(i, size) }
		measure(fmt.Sprintf("fp%d/none", size), plain, ms, 3)
		measure(fmt.Sprintf("fp%d/dict", size), e, ms, 3)
	}

}
func footprintMail(n, size int) []byte {
	var b strings.Builder
	if size >= 1000 {
		fmt.Fprintf(&b, "Received: from mx%d.buyer.test (mx%d.buyer.test [192.0.2.%d])\r\n\tby mx.shop.test with ESMTPS id %08x\r\n\tfor <agent@shop.test>; Fri, 27 Nov 2026 10:%02d:%02d +0000\r\n",
			n%7, n%7, n%250, n*2654435761, n%60, n%59)
		fmt.Fprintf(&b, "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=buyer.test; s=sel%d;\r\n\th=from:to:subject:date:message-id; bh=%s;\r\n\tb=%s\r\n",
			n%3, base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%032x", n*7919)))[:43]+"=",
			base64.StdEncoding.EncodeToString([]byte(strings.Repeat(fmt.Sprintf("%016x", n*104729), 16)))[:342])
	}
	fmt.Fprintf(&b, "From: Buyer %d <buyer%d@buyer.test>\r\nTo: agent@shop.test\r\nSubject: Order %d: question about delivery\r\n"+
		"Date: Fri, 27 Nov 2026 10:%02d:%02d +0000\r\nMessage-ID: <fp%d.%d@buyer.test>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", n%100, n%100, n, n%60, n%59, n, size, n)
	text := fmt.Sprintf("Hello, order %d: when does it ship? I paid =E2=82=AC%d.%02d.", n, n%500, n%100)
	fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n%s\r\n", n, text)
	fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Order %d: when does it ship?</p>\r\n", n, n)
	{
		body := []byte(fmt.Sprintf(`{"order":%d,"sku":"A-%d","qty":%d}`, n, n%97, n%5+1))
		if size >= 1000 {
			body = []byte(fmt.Sprintf(`{"order":%d,"items":[{"sku":"A-%d","qty":%d}],"note":"%s"}`, n, n%97, n%5+1, strings.Repeat("please deliver to the back door ", 4)))
		}
		fmt.Fprintf(&b, "--b%d\r\nContent-Type: application/json; name=\"o.json\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", n)
		enc := base64.StdEncoding.EncodeToString(body)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n")
	}
	for b.Len() < size-20 {
		fmt.Fprintf(&b, "<p>Line %d of the quoted conversation, kept by the mail client below the reply.</p>\r\n", b.Len())
	}
	fmt.Fprintf(&b, "--b%d--\r\n", n)
	return []byte(b.String())
}
