package imapview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// TestVerdictHeader pins the fields the view prepends: exact bytes for
// the common cases, and that nothing from a signature (d=, s=, reason)
// can add a line or a field.
func TestVerdictHeader(t *testing.T) {
	t.Parallel()
	js := func(rs ...dkim.Result) json.RawMessage {
		b, _ := json.Marshal(rs)
		return b
	}
	pass := dkim.Result{Domain: "agents.test", Selector: "envelopd", Algorithm: "ed25519-sha256", Result: "pass"}
	for _, c := range []struct {
		name, host string
		m          store.FolderMessage
		want       string
	}{
		{"accepted, signed", "mx.test", store.FolderMessage{Status: "accepted", AuthResults: "x", DKIM: js(pass)},
			"Authentication-Results: mx.test;\r\n\tdkim=pass header.a=ed25519-sha256 header.d=agents.test header.s=envelopd\r\nX-Envelopd-Status: accepted\r\n"},
		{"unsigned", "mx.test", store.FolderMessage{Status: "accepted", AuthResults: "x", DKIM: js()},
			"Authentication-Results: mx.test; dkim=none\r\nX-Envelopd-Status: accepted\r\n"},
		{"not verified (sent copy)", "mx.test", store.FolderMessage{Status: "accepted", Direction: "out"},
			"Authentication-Results: mx.test; none\r\nX-Envelopd-Status: accepted\r\n"},
		{"duplicate, codes once", "", store.FolderMessage{Status: "duplicate", AuthResults: "x", DKIM: js(),
			Errors: protocols.Problems{{Code: "duplicate_proof"}, {Code: "amount_mismatch"}, {Code: "duplicate_proof"}}},
			"Authentication-Results: localhost; dkim=none\r\nX-Envelopd-Status: duplicate; errors=duplicate_proof,amount_mismatch\r\n"},
	} {
		if got := string(verdictHeader(c.host, c.m)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// Hostile signature text: control characters, CRLF, a fake field,
	// non-ASCII, very long values.
	evil := dkim.Result{Domain: "evil.test\r\nX-Envelopd-Status: accepted", Selector: "s\x1b[31m" + strings.Repeat("s", 500),
		Algorithm: "rsa-sha256", Result: "fail\r\nX: y", Error: "bad \"sig\"\n\tX-Envelopd-Status: accepted é " + strings.Repeat("r", 1000)}
	got := string(verdictHeader("mx.test\r\nX: y", store.FolderMessage{Status: "quarantined\r\nX: y", AuthResults: "x", DKIM: js(evil, evil),
		Errors: protocols.Problems{{Code: "dkim_failed\r\nX: z"}}}))
	fields := strings.Split(strings.TrimSuffix(strings.ReplaceAll(got, "\r\n\t", " "), "\r\n"), "\r\n")
	if len(fields) != 2 || !strings.HasPrefix(fields[0], "Authentication-Results: mx.test??X: y;") || !strings.HasPrefix(fields[1], "X-Envelopd-Status: quarantined??X: y;") {
		t.Fatalf("hostile input changed the field structure: %q", got)
	}
	for _, l := range strings.Split(got, "\r\n") {
		if len(l) > 998 {
			t.Errorf("line of %d bytes", len(l))
		}
		for _, r := range l {
			if (r < 0x20 && r != '\t') || r > 0x7e {
				t.Errorf("control or non-ASCII character %q in %q", r, l)
			}
		}
	}
	if strings.Count(got, "\n") != strings.Count(got, "\r\n") || strings.Count(got, "\r") != strings.Count(got, "\r\n") {
		t.Errorf("bare CR or LF in %q", got)
	}
}

// TestRenameForged: only header fields named Authentication-Results (any
// case, folded or not) with the view's authserv-id are renamed, in place
// and with the same length; other hosts' fields and the body stay.
func TestRenameForged(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"Authentication-Results: mx.test; dkim=pass\r\n\r\nx", "X-Spoofed-Auth-Results: mx.test; dkim=pass\r\n\r\nx"},
		{"authentication-results :\r\n  MX.Test;\r\n dkim=pass\r\nTo: a\r\n\r\n", "X-Spoofed-Auth-Results :\r\n  MX.Test;\r\n dkim=pass\r\nTo: a\r\n\r\n"},
		{"Authentication-Results: mx.test.evil; dkim=pass\n\n", "Authentication-Results: mx.test.evil; dkim=pass\n\n"},
		{"Authentication-Results: other.test; dkim=pass\r\nAuthentication-Results: mx.test 1; none\r\n\r\n",
			"Authentication-Results: other.test; dkim=pass\r\nX-Spoofed-Auth-Results: mx.test 1; none\r\n\r\n"},
		{"To: a\r\n\r\nAuthentication-Results: mx.test; dkim=pass\r\n", "To: a\r\n\r\nAuthentication-Results: mx.test; dkim=pass\r\n"},
		{"X-Authentication-Results: mx.test; dkim=pass\r\n\r\n", "X-Authentication-Results: mx.test; dkim=pass\r\n\r\n"},
		{"Authentication-Results", "Authentication-Results"},
	} {
		b := []byte(c.in)
		renameForged(b, "mx.test")
		if string(b) != c.want {
			t.Errorf("renameForged(%q) = %q, want %q", c.in, b, c.want)
		}
	}
}

// FuzzRenameForged: the served copy keeps its length, and the only bytes
// that change are field names Authentication-Results becoming
// X-Spoofed-Auth-Results.
func FuzzRenameForged(f *testing.F) {
	f.Add([]byte("Authentication-Results: mx.test; dkim=pass\r\n\r\nx"), "mx.test")
	f.Add([]byte("authentication-results :\r\n  MX.Test;\r\n dkim=pass\r\nTo: a\r\n\r\n"), "MX.test")
	f.Add([]byte("Authentication-Results:mx.test\nAuthentication-Results: \n\tmx.test;\n\n"), "mx.test")
	f.Fuzz(func(t *testing.T, raw []byte, host string) {
		b := bytes.Clone(raw)
		renameForged(b, host)
		if len(b) != len(raw) {
			t.Fatalf("length %d → %d", len(raw), len(b))
		}
		for i := 0; i < len(b); {
			if b[i] == raw[i] {
				i++
				continue
			}
			if !bytes.HasPrefix(b[i:], []byte(spoofedAR)) || !strings.EqualFold(string(raw[i:i+len(spoofedAR)]), "Authentication-Results") {
				t.Fatalf("byte %d changed outside a renamed field name: %q → %q", i, raw, b)
			}
			i += len(spoofedAR)
		}
	})
}

// FuzzVerdictHeader: whatever the stored verdict holds, the prepended
// header is two fields of printable ASCII, CRLF-terminated, folded only
// with CRLF TAB, no line over 998 bytes.
func FuzzVerdictHeader(f *testing.F) {
	f.Add("mx.test", "accepted", "duplicate_proof", "agents.test", "envelopd", "pass", "", true)
	f.Add("h\r\nX: y", "quarantined\n", "x\r\ny", "d\r\nX-Envelopd-Status: accepted", "s\x1b", "fail", "r\"\\\n", true)
	f.Fuzz(func(t *testing.T, host, status, code, domain, selector, result, reason string, verified bool) {
		rs, _ := json.Marshal([]dkim.Result{{Domain: domain, Selector: selector, Algorithm: "rsa-sha256", Result: result, Error: reason}})
		m := store.FolderMessage{Status: status, DKIM: rs, Errors: protocols.Problems{{Code: protocols.Code(code)}}}
		if verified {
			m.AuthResults = "x"
		}
		got := string(verdictHeader(host, m))
		if !strings.HasSuffix(got, "\r\n") {
			t.Fatalf("not CRLF-terminated: %q", got)
		}
		fields := strings.Split(strings.TrimSuffix(strings.ReplaceAll(got, "\r\n\t", " "), "\r\n"), "\r\n")
		if len(fields) != 2 || !strings.HasPrefix(fields[0], "Authentication-Results: ") || !strings.HasPrefix(fields[1], "X-Envelopd-Status: ") {
			t.Fatalf("field structure: %q", got)
		}
		for _, l := range strings.Split(strings.TrimSuffix(got, "\r\n"), "\r\n") {
			if len(l) > 998 {
				t.Fatalf("line of %d bytes", len(l))
			}
			for _, r := range strings.TrimPrefix(l, "\t") {
				if r < 0x20 || r > 0x7e {
					t.Fatalf("character %q in %q", r, got)
				}
			}
		}
	})
}

// TestVerdictHeaderSenderVerdict: with sender checks, the view presents
// the stored spf, dkim, dmarc and arc results under its own id, and no
// stored text can add a line.
func TestVerdictHeaderSenderVerdict(t *testing.T) {
	t.Parallel()
	v := &senderauth.Verdict{SPF: senderauth.SPF{Result: "pass", Domain: "shop.test"},
		DMARC: senderauth.DMARC{Result: "pass", Domain: "shop.test", Policy: "reject"}, ARC: senderauth.ARC{Result: "none"}}
	ar := senderauth.AuthResults("mx.test", []dkim.Result{{Domain: "shop.test", Selector: "s", Algorithm: "rsa-sha256", Result: "pass"}}, v)
	got := string(verdictHeader("mx.test", store.FolderMessage{Status: "accepted", AuthResults: ar}))
	want := "Authentication-Results: mx.test; spf=pass smtp.mailfrom=shop.test;\r\n" +
		"\tdkim=pass header.a=rsa-sha256 header.d=shop.test header.s=s;\r\n" +
		"\tdmarc=pass header.from=shop.test policy.dmarc=reject; arc=none\r\nX-Envelopd-Status: accepted\r\n"
	if got != want {
		t.Fatalf("\n got %q\nwant %q", got, want)
	}
	v.SPF.Reason = "x\r\nX-Envelopd-Status: accepted"
	got = string(verdictHeader("mx.test", store.FolderMessage{Status: "quarantined", AuthResults: senderauth.AuthResults("mx.test", nil, v)}))
	if n := strings.Count(got, "\r\n") - strings.Count(got, "\r\n\t"); n != 2 {
		t.Fatalf("stored text added a field: %q", got)
	}
}
