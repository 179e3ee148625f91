// Package doctest makes the documentation a test: it reads the fenced
// code blocks of README.md and docs/*.md, with the marks that say how each
// is run (docs/testing.md, "Docs that run"). Its tests check every mark
// and link on each `go test ./...` and, under ENVELOPD_INTEROP=1, run every
// runnable block as written, in order, in a fresh directory per page,
// with a freshly built envelopd on PATH.
//
// A block with no mark is run. A mark is an HTML comment (invisible on a
// rendered page) on the line just before the opening fence:
//
//	<!-- doc: skip: REASON -->          not run: a synopsis, or needs the internet
//	<!-- doc: output -->                the previous block's expected standard output
//	<!-- doc: file NAME -->             not run: written to NAME (an input later blocks use)
//	<!-- doc: exit N -->                run; exits with status N (default 0)
//	<!-- doc: replace "OLD" "NEW" -->   run with OLD replaced by NEW (placeholders)
//
// Several marks may share one comment, separated by ";" (skip's reason
// runs to the end of the comment). Fences follow CommonMark: three or more
// backticks, possibly indented (a block inside a list item).
package doctest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File string // as given to Parse
	Line int    // of the opening fence, 1-based
	Lang string // the info string's first word ("" for none)
	Text string // the content, indentation of the fence removed

	Skip    string      // the reason given with skip; "" when run
	Output  bool        // the expected output of the block before it
	WriteTo string      // file: the name to write Text to
	Exit    int         // the exit status expected
	Replace [][2]string // placeholders: OLD → NEW, in order
}

// Runs reports whether the block is run (not skipped, not an input or an
// expected output).
func (b *Block) Runs() bool { return b.Skip == "" && !b.Output && b.WriteTo == "" }

// Where names the block in messages: FILE:LINE (```LANG block).
func (b *Block) Where() string {
	lang := b.Lang
	if lang == "" {
		lang = "unlabelled"
	}
	return fmt.Sprintf("%s:%d (```%s block)", b.File, b.Line, lang)
}

// ParseFile reads the file at path and returns its content and blocks,
// naming it name in blocks and errors.
func ParseFile(path, name string) ([]byte, []Block, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	blocks, err := Parse(name, src)
	return src, blocks, err
}

// Parse returns src's fenced code blocks with their marks; file names src
// in errors. A malformed mark or an unclosed fence is an error naming its
// line.
func Parse(file string, src []byte) ([]Block, error) {
	var (
		blocks  []Block
		mark    string // the comment on the line before, if any
		markAt  int
		in      *Block
		fence   string
		indent  string
		body    strings.Builder
		lineNum int
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lineNum++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if in != nil {
			if strings.HasPrefix(trimmed, fence) && strings.TrimRight(trimmed, "`") == "" {
				in.Text = body.String()
				blocks = append(blocks, *in)
				in = nil
				continue
			}
			body.WriteString(strings.TrimPrefix(line, indent))
			body.WriteByte('\n')
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
			b := &Block{File: file, Line: lineNum, Lang: strings.Fields(trimmed[n:] + " x")[0]}
			if b.Lang == "x" && strings.TrimSpace(trimmed[n:]) == "" {
				b.Lang = ""
			}
			if mark != "" && markAt == lineNum-1 {
				if err := b.parseMark(mark); err != nil {
					return nil, fmt.Errorf("%s:%d: %w", file, markAt, err)
				}
			}
			in, fence, indent = b, trimmed[:n], line[:len(line)-len(trimmed)]
			body.Reset()
			continue
		}
		if s, ok := strings.CutPrefix(trimmed, "<!-- doc:"); ok {
			s, ok = strings.CutSuffix(strings.TrimSpace(s), "-->")
			if !ok {
				return nil, fmt.Errorf("%s:%d: a doc mark must fit on one line and end with -->", file, lineNum)
			}
			mark, markAt = strings.TrimSpace(s), lineNum
			continue
		}
		if mark != "" && markAt == lineNum-1 {
			return nil, fmt.Errorf("%s:%d: a doc mark must be on the line just before a code block's fence", file, markAt)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if in != nil {
		return nil, fmt.Errorf("%s:%d: code block not closed", file, in.Line)
	}
	if mark != "" && markAt == lineNum {
		return nil, fmt.Errorf("%s:%d: a doc mark must be on the line just before a code block's fence", file, markAt)
	}
	return blocks, nil
}

// parseMark reads one comment's marks into b.
func (b *Block) parseMark(s string) error {
	for s != "" {
		var m string
		if strings.HasPrefix(s, "skip") {
			// The reason runs to the end.
			m, s = s, ""
		} else {
			m, s = cutMark(s)
		}
		m, s = strings.TrimSpace(m), strings.TrimSpace(s)
		word, arg, _ := strings.Cut(m, " ")
		word = strings.TrimSuffix(word, ":")
		arg = strings.TrimSpace(arg)
		switch word {
		case "skip":
			arg = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(m, "skip"), ":"))
			if arg == "" {
				return fmt.Errorf("doc mark %q: skip needs a reason (skip: REASON)", m)
			}
			b.Skip = arg
		case "output":
			b.Output = true
		case "file":
			if arg == "" || strings.ContainsAny(arg, "/ ") {
				return fmt.Errorf("doc mark %q: file needs a plain file name", m)
			}
			b.WriteTo = arg
		case "exit":
			n, err := strconv.Atoi(arg)
			if err != nil {
				return fmt.Errorf("doc mark %q: exit needs a number", m)
			}
			b.Exit = n
		case "replace":
			old, rest, err := quoted(arg)
			if err == nil {
				var nw string
				nw, rest, err = quoted(rest)
				if err == nil && strings.TrimSpace(rest) != "" {
					err = fmt.Errorf("text after the two strings")
				}
				if err == nil {
					b.Replace = append(b.Replace, [2]string{old, nw})
				}
			}
			if err != nil {
				return fmt.Errorf(`doc mark %q: replace needs two Go-quoted strings, "OLD" "NEW": %v`, m, err)
			}
		default:
			return fmt.Errorf("doc mark %q: unknown (want skip: REASON, output, file NAME, exit N or replace \"OLD\" \"NEW\")", m)
		}
	}
	return nil
}

// cutMark cuts s at its first ";" outside a quoted string.
func cutMark(s string) (string, string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case c == ';' && !inQuote:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// quoted cuts one Go-quoted string from the front of s.
func quoted(s string) (string, string, error) {
	s = strings.TrimSpace(s)
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", s, err
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}
