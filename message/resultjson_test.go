package message

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// TestIncomingResultJSON: Incoming stores the JSON Analyze produced while
// bounding the result instead of marshalling it again; it must be exactly
// the final result's JSON, for every mail of the corpus and for one cut
// by the output limit (whose JSON is made after the cut).
func TestIncomingResultJSON(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../testdata/eml/*.eml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	type tc struct {
		name string
		raw  []byte
		lim  parse.Limits
	}
	var cases []tc
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{filepath.Base(f), raw, parse.Limits{}})
	}
	many := []byte("From: a@x.test\r\nTo: " + strings.Repeat("b@y.test, ", 20000) + "c@y.test\r\nSubject: PAY | x\r\n" +
		"Message-ID: <m@x.test>\r\n\r\n{}\r\n")
	cases = append(cases, tc{"cut", many, parse.Limits{MaxOutputBytes: 1}})
	cut := 0
	for _, c := range cases {
		a := Analyze(context.Background(), c.raw, AnalyzeOptions{Limits: c.lim})
		in := Incoming(a, c.raw, store.DirIn)
		want, err := a.Result.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in.Result, want) {
			t.Errorf("%s: stored result differs from the result's JSON:\n%s\nwant\n%s", c.name, in.Result, want)
		}
		if a.resultJSON == nil {
			cut++
		}
	}
	if cut != 1 {
		t.Errorf("%d results cut, want 1 (the last case)", cut)
	}
}

// TestIncomingSenderVerdict: Incoming tells the store what the sender
// verdict it writes into the result says (store.Incoming.SenderVerdict),
// the same as the result read back: unauthenticated exactly when the
// result holds a verdict whose authenticated_as is null.
func TestIncomingSenderVerdict(t *testing.T) {
	t.Parallel()
	raw := []byte("From: a@x.test\r\nTo: b@y.test\r\nSubject: hi\r\nMessage-ID: <v@x.test>\r\n\r\nhello\r\n")
	for _, c := range []struct {
		name   string
		sender *senderauth.Verdict
		want   store.SenderVerdict
	}{
		{"no verdict", nil, store.SenderVerdictAuthenticated},
		{"authenticates x.test", &senderauth.Verdict{AuthenticatedAs: "x.test"}, store.SenderVerdictAuthenticated},
		{"authenticates none", &senderauth.Verdict{}, store.SenderVerdictUnauthenticated},
	} {
		a := Analyze(context.Background(), raw, AnalyzeOptions{})
		a.Sender = c.sender
		in := Incoming(a, raw, store.DirIn)
		if in.SenderVerdict != c.want {
			t.Errorf("%s: SenderVerdict %d, want %d", c.name, in.SenderVerdict, c.want)
		}
		v := senderauth.FromResult(in.Result)
		if got := v != nil && v.AuthenticatedAs == ""; got != (c.want == store.SenderVerdictUnauthenticated) {
			t.Errorf("%s: result %s read back unauthenticated %v, SenderVerdict %d", c.name, in.Result, got, in.SenderVerdict)
		}
	}
}

// FuzzStr: str reads a JSON string as encoding/json does, "" for
// anything else.
func FuzzStr(f *testing.F) {
	for _, s := range []string{`"base"`, `"caf\u00e9"`, `"a\"b"`, `"tab	x"`, `"\xff"`, `"a"b"`, `"x" `, `7`, `""`, `"`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		if json.Unmarshal(raw, &want) != nil {
			want = ""
		}
		if got := str(raw); got != want {
			t.Fatalf("str(%q) = %q, encoding/json %q", raw, got, want)
		}
	})
}
