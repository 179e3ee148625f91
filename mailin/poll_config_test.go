package mailin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envelopd/envelopd/internal/testcorpus"
)

// TestParsePollConfig: each testdata/imap/config/NAME.conf has NAME.want:
// one line per account ("LINE KEY password-file=… move-to=… address=…
// mailbox=…" and " oauth2=…" when set), or "error TEXT" where TEXT must appear in the error.
func TestParsePollConfig(t *testing.T) {
	testcorpus.Run(t, "../testdata/imap/config/*.conf", ErrPollConfig, func(in []byte) (string, error) {
		got, err := ParsePollConfig(bytes.NewReader(in))
		var b strings.Builder
		for _, c := range got {
			fmt.Fprintf(&b, "%d %s password-file=%s move-to=%s address=%s mailbox=%s",
				c.Line, c.Account.Key(), c.PasswordFile, c.MoveTo, c.Address, c.StoreMailbox)
			if c.OAuth2Config != "" {
				fmt.Fprintf(&b, " oauth2=%s", c.OAuth2Config)
			}
			b.WriteString("\n")
		}
		return b.String(), err
	})
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
