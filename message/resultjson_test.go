package message

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/parse"
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
