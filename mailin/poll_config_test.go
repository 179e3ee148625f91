package mailin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParsePollConfig: each testdata/imap/config/NAME.conf has NAME.want:
// one line per account ("LINE KEY password-file=… move-to=… address=…
// mailbox=…"), or "error TEXT" where TEXT must appear in the error.
func TestParsePollConfig(t *testing.T) {
	files, err := filepath.Glob("../testdata/imap/config/*.conf")
	if err != nil || len(files) == 0 {
		t.Fatalf("no config cases: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".conf")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(strings.TrimSuffix(file, ".conf") + ".want")
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParsePollConfig(bytes.NewReader(in))
			if w, ok := strings.CutPrefix(strings.TrimSpace(string(want)), "error "); ok {
				if !errors.Is(err, ErrPollConfig) || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v, want ErrPollConfig containing %q", err, w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, c := range got {
				fmt.Fprintf(&b, "%d %s password-file=%s move-to=%s address=%s mailbox=%s\n",
					c.Line, c.Account.Key(), c.PasswordFile, c.MoveTo, c.Address, c.StoreMailbox)
			}
			if b.String() != string(want) {
				t.Errorf("got\n%s\nwant\n%s", b.String(), want)
			}
		})
	}
}

func FuzzParsePollConfig(f *testing.F) {
	files, _ := filepath.Glob("../testdata/imap/config/*.conf")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParsePollConfig(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrPollConfig) {
				t.Fatalf("error %v is not ErrPollConfig", err)
			}
			return
		}
		for _, c := range got {
			if c.Account.Host == "" || c.Account.Username == "" || c.Line < 1 {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}
