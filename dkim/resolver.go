package dkim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"unicode"
)

// Resolver looks up the TXT records of a DNS name, one string per record
// (the character-strings of a record already concatenated, as
// net.Resolver.LookupTXT returns them). A name without records must yield an
// error matching ErrNoRecord (or a *net.DNSError with IsNotFound), which
// becomes permerror; any other error becomes temperror (RFC 6376 section
// 6.1.2).
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// ErrNoRecord is the error a Resolver returns (wrapped) for a name that has
// no TXT record: the key was not found.
var ErrNoRecord = errors.New("key not found (no TXT record)")

// LookupError is a failed key lookup. It implements net.Error so that
// go-msgauth maps Temporary ones to temperror and the others to permerror.
type LookupError struct {
	Name string
	// Temp is true for failures that may go away (timeout, SERVFAIL).
	Temp bool
	Err  error
}

func (e *LookupError) Error() string { return "lookup " + e.Name + ": " + e.Err.Error() }
func (e *LookupError) Unwrap() error { return e.Err }

// Timeout implements net.Error.
func (e *LookupError) Timeout() bool {
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout() || errors.Is(e.Err, context.DeadlineExceeded)
}

// Temporary implements net.Error.
func (e *LookupError) Temporary() bool { return e.Temp }

// classify turns any resolver error into a *LookupError with the right
// temporariness: not found is permanent, everything else temporary.
func classify(name string, err error) *LookupError {
	var le *LookupError
	if errors.As(err, &le) {
		return le
	}
	var de *net.DNSError
	switch {
	case errors.Is(err, ErrNoRecord):
		return &LookupError{Name: name, Err: err}
	case errors.As(err, &de) && de.IsNotFound:
		return &LookupError{Name: name, Err: fmt.Errorf("%w: %v", ErrNoRecord, err)}
	default:
		return &LookupError{Name: name, Temp: true, Err: err}
	}
}

// normName lower-cases a DNS name and drops its trailing dot(s).
func normName(name string) string {
	return strings.TrimRight(strings.ToLower(strings.TrimSpace(name)), ".")
}

// StaticResolver answers TXT lookups from a fixed table, for offline use and
// tests. It is safe for concurrent use.
type StaticResolver struct {
	mu      sync.RWMutex
	records map[string][]string
}

// NewStaticResolver returns an empty StaticResolver.
func NewStaticResolver() *StaticResolver {
	return &StaticResolver{records: make(map[string][]string)}
}

// Add adds one TXT record for name (case-insensitive, trailing dot
// optional). Adding twice for one name gives two records, which DKIM
// verifiers reject (RFC 6376 section 3.6.2.2).
func (r *StaticResolver) Add(name, txt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := normName(name)
	r.records[n] = append(r.records[n], txt)
}

// LookupTXT implements Resolver.
func (r *StaticResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, &LookupError{Name: name, Temp: true, Err: err}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	txts, ok := r.records[normName(name)]
	if !ok {
		return nil, &LookupError{Name: name, Err: ErrNoRecord}
	}
	return append([]string(nil), txts...), nil
}

// SyntaxError is a bad line in a static key file.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseStatic reads a static key file: one record per line, the DNS name,
// white space, then the TXT value, e.g.
//
//	ed1._domainkey.lab.test v=DKIM1; k=ed25519; p=11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=
//
// This is the format of OpenDKIM's TestDNSData file data set: "#" starts a
// comment that runs to the end of the line, blank lines are skipped. As an
// extension, a value written as zone-file character-strings ("v=DKIM1; "
// "p=MIIB...") is unquoted and concatenated into one record; the same name
// on two lines gives two records.
func ParseStatic(rd io.Reader) (*StaticResolver, error) {
	r := NewStaticResolver()
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// The name ends at the first white space of any kind (a \v left
		// in the name would make it unmatchable).
		i := strings.IndexFunc(line, unicode.IsSpace)
		if i < 0 {
			return nil, &SyntaxError{Line: n, Msg: fmt.Sprintf("%q has no TXT value", line)}
		}
		name, value := line[:i], strings.TrimSpace(line[i+1:])
		if strings.HasPrefix(value, `"`) {
			v, err := unquoteStrings(value)
			if err != nil {
				return nil, &SyntaxError{Line: n, Msg: err.Error()}
			}
			value = v
		}
		r.Add(name, value)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// unquoteStrings concatenates zone-file character-strings: "a" "b" → ab,
// with \" and \\ escapes.
func unquoteStrings(s string) (string, error) {
	var b strings.Builder
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] != '"' {
			return "", fmt.Errorf("text after quoted string: %q", s)
		}
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", errors.New("unterminated quoted string")
		}
		s = s[i+1:]
	}
	return b.String(), nil
}

// LoadStaticResolver reads a static key file (see ParseStatic).
func LoadStaticResolver(path string) (*StaticResolver, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := ParseStatic(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
