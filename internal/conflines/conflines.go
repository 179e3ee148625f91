// Package conflines reads the line-oriented files envelopd takes (password
// files, poll, DKIM and OAuth2 configs, test vector expectations): one
// entry a line, each trimmed of blanks, blank lines and lines starting
// with "#" skipped, lines numbered from 1 for error messages.
package conflines

import (
	"bufio"
	"io"
	"strings"
)

// Scanner reads the entries of a file. Like bufio.Scanner, whose limits it
// has (a line longer than 64 KiB is an error), it is used as
//
//	sc := conflines.New(r)
//	for sc.Scan() {
//		n, line := sc.Line()
//		…
//	}
//	if err := sc.Err(); err != nil { … }
type Scanner struct {
	sc   *bufio.Scanner
	n    int
	line string
}

// New returns a Scanner reading r.
func New(r io.Reader) *Scanner { return &Scanner{sc: bufio.NewScanner(r)} }

// Scan advances to the next line that is neither blank nor a comment; it
// is false at the end of the input or on a read error (Err).
func (s *Scanner) Scan() bool {
	for s.sc.Scan() {
		s.n++
		s.line = strings.TrimSpace(s.sc.Text())
		if s.line != "" && !strings.HasPrefix(s.line, "#") {
			return true
		}
	}
	return false
}

// Line is the line Scan found, trimmed, and its number in the file.
func (s *Scanner) Line() (n int, line string) { return s.n, s.line }

// Err is the read error that ended Scan, or nil at the end of the input.
func (s *Scanner) Err() error { return s.sc.Err() }
