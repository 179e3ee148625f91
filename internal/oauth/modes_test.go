package oauth

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/envelopd/envelopd/internal/secretfile"
)

// TestFileModes: a client-secret or refresh-token file readable by the
// group or others is refused (as ssh does), and so is a
// config file that others may write (its token-command is run).
func TestFileModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o644, false}} {
		p := filepath.Join(dir, "secret-"+c.mode.String())
		if err := os.WriteFile(p, []byte("s3cret\n"), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, c.mode) // whatever the umask
		got, err := ReadSecretFile(p)
		if c.ok && (err != nil || got != "s3cret") {
			t.Errorf("mode %v: %q %v, want the secret", c.mode, got, err)
		}
		if !c.ok && !errors.Is(err, secretfile.ErrTooOpen) {
			t.Errorf("mode %v: %q %v, want secret_file_too_open", c.mode, got, err)
		}
	}
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o644, true}, {0o664, false}, {0o646, false}} {
		p := filepath.Join(dir, "oauth2-"+c.mode.String()+".conf")
		if err := os.WriteFile(p, []byte("token-command = echo tok\n"), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, c.mode)
		_, err := LoadConfig(p)
		if c.ok && err != nil {
			t.Errorf("config mode %v: %v", c.mode, err)
		}
		if !c.ok && !errors.Is(err, ErrConfig) {
			t.Errorf("config mode %v: %v, want ErrConfig (writable by others)", c.mode, err)
		}
	}
}
