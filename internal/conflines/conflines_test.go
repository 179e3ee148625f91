package conflines

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

func TestScanner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"blanks and comments", "\n  \n# a comment\n\t# indented comment\n", nil},
		{"numbered from 1", "a\n\n# c\n  b c  \r\nd", []string{"1:a", "4:b c", "5:d"}},
		{"hash inside a line", "k=v # not a comment\n", []string{"1:k=v # not a comment"}},
		{"CRLF", "x\r\ny\r\n", []string{"1:x", "2:y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			sc := New(strings.NewReader(tc.in))
			for sc.Scan() {
				n, line := sc.Line()
				got = append(got, fmt.Sprintf("%d:%s", n, line))
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestScannerErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	sc := New(iotest.TimeoutReader(strings.NewReader("a\nb\n")))
	sc2 := New(iotest.ErrReader(boom))
	if sc2.Scan() || !errors.Is(sc2.Err(), boom) {
		t.Errorf("ErrReader: Err = %v, want boom", sc2.Err())
	}
	for sc.Scan() {
	}
	if sc.Err() == nil {
		t.Error("TimeoutReader: no error")
	}
	long := New(strings.NewReader(strings.Repeat("x", 70000) + "\n"))
	if long.Scan() || long.Err() == nil {
		t.Error("a 70,000-byte line: no error")
	}
}

// FuzzScanner: every entry is trimmed, not empty, not a comment, and the
// line numbers grow; nothing is lost of a line that is neither blank nor
// a comment (checked against a plain split).
func FuzzScanner(f *testing.F) {
	f.Add("a\n\n# c\n  b c  \r\nd")
	f.Add("#\n#x\n x # y \n")
	f.Fuzz(func(t *testing.T, in string) {
		var want []string
		for _, l := range strings.Split(in, "\n") {
			l = strings.TrimSpace(strings.TrimSuffix(l, "\r"))
			if l != "" && !strings.HasPrefix(l, "#") {
				want = append(want, l)
			}
		}
		sc := New(strings.NewReader(in))
		var got []string
		last := 0
		for sc.Scan() {
			n, line := sc.Line()
			if n <= last || line == "" || line != strings.TrimSpace(line) || strings.HasPrefix(line, "#") {
				t.Fatalf("entry %d %q after line %d", n, line, last)
			}
			last = n
			got = append(got, line)
		}
		if sc.Err() != nil {
			return // a line over bufio's limit
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != len(want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
