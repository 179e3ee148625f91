package mailout

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/envelopd/envelopd/dkim"
	"github.com/envelopd/envelopd/internal/conflines"
)

// ErrDKIMConfig: a line of a DKIM signer config file is malformed, or the
// key it names cannot be loaded.
var ErrDKIMConfig = errors.New("bad DKIM config")

// DKIMConfigError names the file and line a DKIM config problem is on; it
// matches ErrDKIMConfig with errors.Is.
type DKIMConfigError struct {
	File string // "" when parsing a reader without a name
	Line int    // 0 when the file itself could not be read
	Err  error
}

func (e *DKIMConfigError) Error() string {
	switch {
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %v: %v", e.file(), e.Line, ErrDKIMConfig, e.Err)
	default:
		return fmt.Sprintf("%s: %v: %v", e.file(), ErrDKIMConfig, e.Err)
	}
}

func (e *DKIMConfigError) file() string {
	if e.File == "" {
		return "dkim config"
	}
	return e.File
}

func (e *DKIMConfigError) Unwrap() []error { return []error{ErrDKIMConfig, e.Err} }

// DKIMSignerConfig is one line of a DKIM signer config file.
type DKIMSignerConfig struct {
	Line     int
	Domain   string // domain=D (d=, lower-cased)
	Selector string // selector=S (s=)
	Key      string // key=PATH, as written (LoadDKIMConfig resolves it)
}

// ParseDKIMConfig reads a DKIM signer config: one signer per line as
// blank-separated key=value settings domain=, selector= and key= (all
// three required, each once, in any order); blank lines and lines
// starting with # are ignored. Several lines give several signatures
// (e.g. Ed25519 and RSA). name is used in error messages only.
//
//	# Ed25519 and RSA for agents.test
//	domain=agents.test selector=ed1 key=ed.pem
//	domain=agents.test selector=rsa1 key=/etc/envelopd/rsa.pem
func ParseDKIMConfig(name string, r io.Reader) ([]DKIMSignerConfig, error) {
	var out []DKIMSignerConfig
	seen := map[string]int{}
	sc := conflines.New(r)
	for sc.Scan() {
		n, line := sc.Line()
		bad := func(format string, args ...any) error {
			return &DKIMConfigError{File: name, Line: n, Err: fmt.Errorf(format, args...)}
		}
		c := DKIMSignerConfig{Line: n}
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || v == "" {
				return nil, bad("%q: want key=value", kv)
			}
			var dst *string
			switch k {
			case "domain":
				dst = &c.Domain
				v = strings.ToLower(strings.TrimSuffix(v, "."))
			case "selector":
				dst = &c.Selector
			case "key":
				dst = &c.Key
			default:
				return nil, bad("unknown setting %q (want domain, selector, key)", k)
			}
			if *dst != "" {
				return nil, bad("%s given twice", k)
			}
			if (k == "domain" || k == "selector") && !dnsName(v) {
				return nil, bad("%s %q: want a DNS name (letters, digits, '-', '_', '.')", k, v)
			}
			*dst = v
		}
		var missing []string
		for _, m := range []struct{ k, v string }{{"domain", c.Domain}, {"selector", c.Selector}, {"key", c.Key}} {
			if m.v == "" {
				missing = append(missing, m.k+"=")
			}
		}
		if len(missing) > 0 {
			return nil, bad("missing %s", strings.Join(missing, ", "))
		}
		id := c.Selector + "._domainkey." + c.Domain
		if prev, dup := seen[id]; dup {
			return nil, bad("selector %s of %s already listed on line %d", c.Selector, c.Domain, prev)
		}
		seen[id] = n
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, &DKIMConfigError{File: name, Err: err}
	}
	return out, nil
}

// dnsName: non-empty dot-separated labels of letters, digits, '-' and '_'.
func dnsName(s string) bool {
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return len(s) <= 253
}

// LoadDKIMConfig reads the DKIM signer config at path and loads its keys;
// a relative key path is resolved against the config file's directory.
// Every error names path and, when it is about a line, the line.
func LoadDKIMConfig(path string) ([]dkim.Signer, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &DKIMConfigError{File: path, Err: err}
	}
	defer fh.Close()
	cs, err := ParseDKIMConfig(path, fh)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, &DKIMConfigError{File: path, Err: errors.New("no signer (want lines like domain=D selector=S key=PATH)")}
	}
	out := make([]dkim.Signer, 0, len(cs))
	for _, c := range cs {
		key := c.Key
		if !filepath.IsAbs(key) {
			key = filepath.Join(filepath.Dir(path), key)
		}
		s, err := LoadSigner(key, c.Selector, c.Domain)
		if err != nil {
			return nil, &DKIMConfigError{File: path, Line: c.Line, Err: err}
		}
		out = append(out, s)
	}
	return out, nil
}
