package mailin

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
)

type urlCase struct {
	line          int
	url, key, err string
}

func readURLCases(t testing.TB) []urlCase {
	t.Helper()
	f, err := os.Open("../testdata/imap/urls.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []urlCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		c := urlCase{line: n, url: f[0]}
		switch {
		case len(f) == 2:
			c.key = f[1]
		case len(f) == 3 && f[1] == "error":
			c.err = f[2]
		default:
			t.Fatalf("urls.txt:%d: want URL<TAB>KEY or URL<TAB>error<TAB>TEXT", n)
		}
		cases = append(cases, c)
	}
	return cases
}

func TestParseIMAPURL(t *testing.T) {
	for _, c := range readURLCases(t) {
		a, err := ParseIMAPURL(c.url)
		if c.err != "" {
			if err == nil {
				t.Errorf("urls.txt:%d: %s: no error, want %q", c.line, c.url, c.err)
				continue
			}
			if !errors.Is(err, ErrIMAPURL) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("urls.txt:%d: %s: error %q, want ErrIMAPURL containing %q", c.line, c.url, err, c.err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("urls.txt:%d: error %q leaks the password", c.line, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("urls.txt:%d: %s: %v", c.line, c.url, err)
			continue
		}
		if got := a.Key(); got != c.key {
			t.Errorf("urls.txt:%d: %s: key %q, want %q", c.line, c.url, got, c.key)
		}
		// String round-trips to the same account.
		b, err := ParseIMAPURL(a.String())
		if err != nil || b != a {
			t.Errorf("urls.txt:%d: String() %q parses to %+v, %v; want %+v", c.line, a.String(), b, err, a)
		}
	}
}

func TestIMAPAccountNeverLogsPassword(t *testing.T) {
	a, err := ParseIMAPURL("imaps://agent@imap.example.com/INBOX")
	if err != nil {
		t.Fatal(err)
	}
	a.Password = "hunter2-s3cret"
	for _, s := range []string{a.String(), a.LogValue().String(), a.Key()} {
		if strings.Contains(s, a.Password) {
			t.Errorf("%q contains the password", s)
		}
	}
}

func FuzzParseIMAPURL(f *testing.F) {
	for _, c := range readURLCases(f) {
		f.Add(c.url)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseIMAPURL(s)
		if err != nil {
			if !errors.Is(err, ErrIMAPURL) {
				t.Fatalf("error %v is not ErrIMAPURL", err)
			}
			return
		}
		if a.Username == "" || a.Host == "" || a.Mailbox == "" || a.Port < 1 || a.Port > 65535 || a.Password != "" {
			t.Fatalf("accepted %q as %+v", s, a)
		}
		b, err := ParseIMAPURL(a.String())
		if err != nil || b != a {
			t.Fatalf("%q: String() %q parses to %+v, %v; want %+v", s, a.String(), b, err, a)
		}
	})
}
