// Package secretfile reads passwords and private keys from files, and
// refuses a file that other users can read, as OpenSSH refuses a private
// key file whose permissions are "too open" (sshd StrictModes, ssh(1)
// "UNPROTECTED PRIVATE KEY FILE"): a secret readable by the group or by
// everyone is already disclosed, and starting with it hides the problem.
//
// Only regular files are checked: a pipe (--password-file <(pass show x))
// or a device has no meaningful mode here. A file whose mode has any group
// or other bit (mode & 0077) is refused; 0600 and 0400 are the modes to
// use. Kubernetes secret volumes need defaultMode 0400, Docker secrets a
// mode of 0400 in the compose file.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// ErrTooOpen is wrapped by the error for a secret file that the group or
// others may access. Its text is the stable error code.
var ErrTooOpen = errors.New("secret_file_too_open")

// MaxSize bounds what Read reads: a password or a PEM key is small.
const MaxSize = 1 << 20

// ModeError is a secret file whose permissions are too open.
type ModeError struct {
	Path string
	Mode fs.FileMode
}

func (e *ModeError) Error() string {
	return fmt.Sprintf("%s: permissions %04o for %q are too open: a password or key file must not be accessible by group or others (chmod 600 %s)",
		ErrTooOpen, e.Mode.Perm(), e.Path, e.Path)
}

func (e *ModeError) Unwrap() error { return ErrTooOpen }

// check refuses a regular file with any group or other permission bit.
func check(path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		return &ModeError{Path: path, Mode: fi.Mode().Perm()}
	}
	return nil
}

// Check stats path (following symbolic links) and refuses it when it is a
// regular file that the group or others may access.
func Check(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return check(path, fi)
}

// Read returns the contents of the secret file at path (at most MaxSize
// bytes), after checking its mode on the open file.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := check(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a password or key file", path, MaxSize)
	}
	return b, nil
}

// FirstLine returns the first line of the secret file at path, without its
// line ending (LF or CRLF); it may be empty.
func FirstLine(path string) (string, error) {
	b, err := Read(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSuffix(line, "\r"), nil
}
