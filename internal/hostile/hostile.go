// Package hostile generates the mail shapes that check that memory
// and time stay bounded by the input for tests and for `envelopd-load hostile`:
// many small JSON parts, deeply nested JSON, large attachments. Every
// generator is deterministic (the same arguments give the same bytes) and
// writes CRLF line ends, so the mails pass SMTP's bare-line-end check.
package hostile

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

func header(b *bytes.Buffer, id, subject, ctype string) {
	fmt.Fprintf(b, "From: mallory@attacker.test\r\nTo: agent@envelopd.test\r\n"+
		"Subject: %s\r\nMessage-ID: <%s@attacker.test>\r\nDate: Mon, 2 Jan 2006 15:04:05 -0700\r\n"+
		"MIME-Version: 1.0\r\n", subject, id)
	if ctype != "" {
		fmt.Fprintf(b, "Content-Type: %s\r\n", ctype)
	}
	b.WriteString("\r\n")
}

// ManyParts is a multipart/mixed mail with a text part and n small
// application/json parts (100,000 parts in 5.9 MB), each a VCP
// document without its required fields, so that every part inspected
// adds problems to the analysis.
func ManyParts(id string, n int) []byte {
	var b bytes.Buffer
	b.Grow(64 * n)
	header(&b, id, "many parts", "multipart/mixed; boundary=b")
	b.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "--b\r\nContent-Type: application/json\r\n\r\n{\"protocol\":\"vcp\",\"n\":%d}\r\n", i)
	}
	b.WriteString("--b--\r\n")
	return b.Bytes()
}

// Nested returns JSON objects nested depth levels deep: {"a":{"a":…1…}}.
func Nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// nestedLines is Nested(depth) broken into CRLF lines of at most 60
// bytes between tokens (JSON white space), as SMTP needs short lines.
func nestedLines(depth int) string {
	var b strings.Builder
	for i := 0; i < depth; i++ {
		b.WriteString(`{"a":`)
		if i%12 == 11 {
			b.WriteString("\r\n")
		}
	}
	b.WriteString("1\r\n")
	for i := 0; i < depth; i++ {
		b.WriteByte('}')
		if i%60 == 59 {
			b.WriteString("\r\n")
		}
	}
	return b.String()
}

// NestedBody is an Envelopay PAY whose body is about size bytes of nested
// JSON (a 30 KB mail of nested JSON printed 50 MB).
func NestedBody(id string, size int) []byte {
	var b bytes.Buffer
	header(&b, id, "PAY | nested", "text/plain; charset=utf-8")
	b.WriteString(nestedLines(size/6) + "\r\n")
	return b.Bytes()
}

// NestedAttachment is a mail with a JSON attachment of about size bytes of
// nested JSON.
func NestedAttachment(id string, size int) []byte {
	var b bytes.Buffer
	header(&b, id, "nested attachment", "multipart/mixed; boundary=b")
	b.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n")
	b.WriteString("--b\r\nContent-Type: application/json\r\n\r\n" + nestedLines(size/6) + "\r\n--b--\r\n")
	return b.Bytes()
}

// Large is a mail of about size bytes: a text part and a base64
// application/octet-stream attachment (40 concurrent 24 MiB
// mails).
func Large(id string, size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 1024)
	WriteLarge(&b, id, size)
	return b.Bytes()
}

// WriteLarge writes Large(id, size) to w without holding it in memory and
// returns the bytes written.
func WriteLarge(w io.Writer, id string, size int) (int64, error) {
	var b bytes.Buffer
	header(&b, id, "large", "multipart/mixed; boundary=b")
	b.WriteString("--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n")
	b.WriteString("--b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n" +
		"Content-Disposition: attachment; filename=\"blob.bin\"\r\n\r\n")
	written := int64(0)
	raw := make([]byte, 57)
	line := make([]byte, 78)
	line[76], line[77] = '\r', '\n'
	for i := 0; written+int64(b.Len()) < int64(size); i++ {
		for j := range raw {
			raw[j] = byte(i*31 + j)
		}
		base64.StdEncoding.Encode(line, raw)
		b.Write(line)
		if b.Len() >= 64<<10 {
			n, err := w.Write(b.Bytes())
			written += int64(n)
			if err != nil {
				return written, err
			}
			b.Reset()
		}
	}
	b.WriteString("--b--\r\n")
	n, err := w.Write(b.Bytes())
	return written + int64(n), err
}

// Normal is an ordinary valid-looking Envelopay ORDER of about 2 KB, the
// baseline the hostile shapes are compared with.
func Normal(id string) []byte {
	var b bytes.Buffer
	header(&b, id, "ORDER | two widgets", "text/plain; charset=utf-8")
	fmt.Fprintf(&b, "{\r\n  \"v\": \"0.2.0\",\r\n  \"type\": \"order\",\r\n  \"id\": \"%s\",\r\n"+
		"  \"amount\": \"5000000\",\r\n  \"token\": \"USDC\",\r\n  \"chain\": \"solana\",\r\n"+
		"  \"proof\": {\"tx\": \"%s\"},\r\n  \"note\": \"%s\",\r\n  \"memo\": \"%s\"\r\n}\r\n",
		id, strings.Repeat("7", 88), strings.Repeat("widget ", 110), strings.Repeat("gadget ", 110))
	return b.Bytes()
}
