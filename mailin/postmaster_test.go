package mailin

import (
	"strings"
	"testing"
)

// TestRcptFilter: only a domainless postmaster RCPT command is rewritten;
// DATA bodies and BDAT chunks pass unchanged (even when they hold the
// same text), and nothing is rewritten after STARTTLS. Every case is fed
// whole and one byte at a time.
func TestRcptFilter(t *testing.T) {
	const pm = "RCPT TO:<postmaster@postmaster.invalid>"
	for _, c := range []struct{ name, in, want string }{
		{"plain", "RCPT TO:<postmaster>\r\n", pm + "\r\n"},
		{"case and params", "rcpt to: <PostMaster> NOTIFY=NEVER\r\n", "rcpt to: <postmaster@postmaster.invalid> NOTIFY=NEVER\r\n"},
		{"with domain", "RCPT TO:<postmaster@x.test>\r\n", "RCPT TO:<postmaster@x.test>\r\n"},
		{"other", "RCPT TO:<postmasterx>\r\nMAIL FROM:<postmaster>\r\n", "RCPT TO:<postmasterx>\r\nMAIL FROM:<postmaster>\r\n"},
		{"data body", "DATA\r\nRCPT TO:<postmaster>\r\n.\r\nRCPT TO:<postmaster>\r\n",
			"DATA\r\nRCPT TO:<postmaster>\r\n.\r\n" + pm + "\r\n"},
		{"empty body", "DATA\r\n.\r\nRCPT TO:<postmaster>\r\n", "DATA\r\n.\r\n" + pm + "\r\n"},
		{"bdat", "BDAT 22 LAST\r\nRCPT TO:<postmaster>\r\nRCPT TO:<postmaster>\r\n",
			"BDAT 22 LAST\r\nRCPT TO:<postmaster>\r\n" + pm + "\r\n"},
		{"starttls", "STARTTLS\r\nRCPT TO:<postmaster>\r\n", "STARTTLS\r\nRCPT TO:<postmaster>\r\n"},
		{"bare CR before the end", "DATA\r\nhello\r\r\n.\r\nQUIT\r\n", "DATA\r\nhello \r \r\n.\r\nQUIT\r\n"},
		{"bare CR after a leading dot", "DATA\r\n.\r\r\n.\r\n", "DATA\r\n. \r \r\n.\r\n"},
		{"bare CRs at the start", "DATA\r\n\r\r\rx\r\n.\r\n", "DATA\r\n \r  \r  \r x\r\n.\r\n"},
		{"bare CR in a command", "NOOP \rx\r\n", "NOOP \rx\r\n"},
		{"long line", strings.Repeat("x", 3000) + "\r\n" + "RCPT TO:<postmaster>\r\n", strings.Repeat("x", 3000) + "\r\n" + pm + "\r\n"},
	} {
		var f rcptFilter
		if got := string(f.filter([]byte(c.in))); got != c.want {
			t.Errorf("%s whole: %q, want %q", c.name, got, c.want)
		}
		var g rcptFilter
		var out []byte
		for i := range len(c.in) {
			out = append(out, g.filter([]byte{c.in[i]})...)
		}
		if string(out) != c.want {
			t.Errorf("%s bytewise: %q, want %q", c.name, out, c.want)
		}
	}
}

// FuzzRcptFilter: the filter never panics, gives the same bytes however
// the stream is split, and changes nothing in a stream that does not
// name the postmaster or hold a bare CR.
func FuzzRcptFilter(f *testing.F) {
	f.Add([]byte("EHLO x\r\nMAIL FROM:<a@b>\r\nRCPT TO:<postmaster>\r\nDATA\r\nhi\r\n.\r\nQUIT\r\n"), uint8(3))
	f.Add([]byte("BDAT 5 LAST\r\nRCPT TO:<Postmaster>\r\n"), uint8(1))
	f.Add([]byte("STARTTLS\r\n\x16\x03\x01"), uint8(7))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		var whole rcptFilter
		want := string(whole.filter(append([]byte(nil), in...)))
		var parts rcptFilter
		var got []byte
		n := int(step)%64 + 1
		for i := 0; i < len(in); i += n {
			chunk := append([]byte(nil), in[i:min(i+n, len(in))]...)
			got = append(got, parts.filter(chunk)...)
		}
		// Bytes held back for an unfinished command line are not output.
		held := len(whole.line)
		if whole.cr {
			held++
		}
		if string(got) != want {
			t.Fatalf("split by %d: %q, whole: %q", n, got, want)
		}
		bare := strings.Contains(strings.ReplaceAll(string(in), "\r\n", ""), "\r")
		if !bare && !strings.Contains(strings.ToLower(string(in)), "postmaster") && want != string(in[:len(in)-held]) {
			t.Fatalf("changed a stream without postmaster: %q → %q", in, want)
		}
	})
}

// TestRcptFilterInPlace: what is not rewritten is handed on in place (no
// copy per read): pipelined commands, a DATA body with its end, a BDAT
// chunk; a rewritten RCPT or a line begun in an earlier read is copied.
func TestRcptFilterInPlace(t *testing.T) {
	t.Parallel()
	var f rcptFilter
	for _, c := range []struct {
		in      string
		inPlace bool
		want    string
	}{
		{"EHLO x\r\n", true, "EHLO x\r\n"},
		{"MAIL FROM:<a@b>\r\nRCPT TO:<c@d>\r\nDATA\r\n", true, "MAIL FROM:<a@b>\r\nRCPT TO:<c@d>\r\nDATA\r\n"},
		{"Subject: x\r\n\r\nbody\r\n.\r\nRSET\r\nMAIL FROM:<a@b>\r\n", true, "Subject: x\r\n\r\nbody\r\n.\r\nRSET\r\nMAIL FROM:<a@b>\r\n"},
		{"RCPT TO:<postmaster>\r\n", false, "RCPT TO:<" + postmasterSentinel + ">\r\n"},
		{"RCPT TO:<c", true, ""}, // held until its line ends
		{"@d>\r\nBDAT 3 LAST\r\nabc", false, "RCPT TO:<c@d>\r\nBDAT 3 LAST\r\nabc"},
	} {
		in := []byte(c.in)
		out := f.filter(in)
		if string(out) != c.want {
			t.Fatalf("%q: %q, want %q", c.in, out, c.want)
		}
		if got := len(out) > 0 && &out[0] == &in[0]; got != c.inPlace && len(out) > 0 {
			t.Errorf("%q: in place %v, want %v", c.in, got, c.inPlace)
		}
	}
}
