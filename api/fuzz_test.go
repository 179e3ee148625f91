package api

import (
	"net/url"
	"testing"
	"time"
)

// FuzzParseList: any query string gives parameters within bounds or a
// field error, never a panic.
func FuzzParseList(f *testing.F) {
	f.Add("limit=10&ascending=true&labels=%5B%22a%22%5D")
	f.Add("page_token=" + EncodeCursor(Cursor{ID: 5, Inbox: "a@b"}) + "&before=2024-01-01T00:00:00Z")
	f.Add("labels=a,b,c&after=x")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		p, err := ParseList(v)
		if err != nil {
			if _, ok := err.(*fieldError); !ok {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if p.Limit < 1 || p.Limit > maxLimit || p.Cursor.ID < 0 || len(p.Labels) > maxLabels {
			t.Fatalf("out of bounds: %+v", p)
		}
	})
}

// FuzzTokens: page tokens, download tokens and keys parse or fail
// cleanly; what parses round-trips.
func FuzzTokens(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add(EncodeCursor(Cursor{ID: 7}))
	f.Add(signDownload(key, download{Kind: "raw", Row: 3, Expires: time.Unix(4000000000, 0), Key: "0123456789ab"}))
	f.Add("ek_0123456789ab_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := DecodeCursor(s); err == nil {
			if c2, err := DecodeCursor(EncodeCursor(c)); err != nil || c2 != c {
				t.Fatalf("cursor round trip: %+v %+v %v", c, c2, err)
			}
		}
		if d, ok := parseDownload(key, s, time.Unix(0, 0)); ok {
			if signDownload(key, d) == "" || d.Row <= 0 {
				t.Fatalf("download %+v", d)
			}
		}
		if id, sec, ok := ParseKey(s); ok && "ek_"+id+"_"+sec != s {
			t.Fatalf("key %q → %q %q", s, id, sec)
		}
		if row, n, ok := parseAttachmentID(s); ok && attachmentID(row, n) != s {
			t.Fatalf("attachment id %q", s)
		}
	})
}

// FuzzDecodeJSON: request bodies decode or give a ValidationError.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"to":["a@b"],"subject":"x","headers":{"X":"y"},"attachments":[{"content":"eA=="}]}`))
	f.Add([]byte(`{"to":5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var req SendRequest
		if err := DecodeJSON(b, &req); err != nil {
			if e, ok := err.(*Error); !ok || e.Status != 400 {
				t.Fatalf("error %T %v", err, err)
			}
		}
	})
}

// FuzzReadContent: any stored bytes give a message object's content
// (text, html, headers, attachments) without a panic, within bounds.
func FuzzReadContent(f *testing.F) {
	f.Add([]byte("From: a@b\r\nSubject: x\r\n\r\nhello\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b\r\nContent-Type: application/json\r\nContent-Disposition: attachment; filename=a.json\r\n\r\n{}\r\n--b--\r\n"))
	f.Add([]byte("Content-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: base64\r\n\r\nPGI+aGk8L2I+\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := readContent(raw)
		if len(c.attachments) > maxParts {
			t.Fatalf("%d attachments", len(c.attachments))
		}
		for _, a := range c.attachments {
			if len(a.data) > len(raw)+1 {
				t.Fatalf("attachment of %d bytes from %d", len(a.data), len(raw))
			}
		}
	})
}
