package secretfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o700, true},
		{0o640, false}, {0o644, false}, {0o604, false}, {0o620, false}, {0o602, false}, {0o444, false},
	} {
		p := filepath.Join(dir, tc.mode.String())
		if err := os.WriteFile(p, []byte("s3cret\r\nrest"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		got, err := FirstLine(p)
		cerr := Check(p)
		if tc.ok {
			if err != nil || got != "s3cret" || cerr != nil {
				t.Errorf("%04o: %q %v %v, want s3cret", tc.mode, got, err, cerr)
			}
			continue
		}
		var me *ModeError
		if !errors.Is(err, ErrTooOpen) || !errors.As(err, &me) || me.Path != p || me.Mode != tc.mode || !errors.Is(cerr, ErrTooOpen) {
			t.Errorf("%04o: %q %v, want ErrTooOpen", tc.mode, got, err)
			continue
		}
		// The message names the file and its mode, as ssh does.
		if msg := err.Error(); !strings.Contains(msg, p) || !strings.Contains(msg, fmt.Sprintf("permissions %04o", uint32(tc.mode))) || !strings.Contains(msg, "too open") {
			t.Errorf("%04o: message %q", tc.mode, msg)
		}
		if got != "" {
			t.Errorf("%04o: the secret was returned: %q", tc.mode, got)
		}
	}
}

// TestNotRegular: a pipe or device (process substitution, /dev/stdin) is
// read without a mode check.
func TestNotRegular(t *testing.T) {
	t.Parallel()
	if _, err := Read(os.DevNull); err != nil {
		t.Errorf("%s: %v", os.DevNull, err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}
