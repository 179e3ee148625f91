package parse

import (
	"bytes"
	"html"
)

// htmlToText turns an HTML body into text for the JSON search: tags are
// dropped, block-level tags become line breaks, <script>, <style>, <head>
// and <title> are dropped with their content, and so is <blockquote> (how
// Gmail, Apple Mail and Thunderbird quote in HTML: quoted material is not
// the message). Entities are decoded after the tags are gone, so "&lt;b&gt;"
// stays text, and no-break spaces become spaces (HTML mail indents JSON
// with &nbsp;).
func htmlToText(h []byte) []byte {
	out := make([]byte, 0, len(h))
	for i := 0; i < len(h); {
		c := h[i]
		if c != '<' {
			out = append(out, c)
			i++
			continue
		}
		if bytes.HasPrefix(h[i:], []byte("<!--")) {
			if j := bytes.Index(h[i+4:], []byte("-->")); j >= 0 {
				i += 4 + j + 3
			} else {
				i = len(h)
			}
			continue
		}
		name, closing, end := tag(h, i)
		if name == "" {
			out = append(out, c) // a literal '<'
			i++
			continue
		}
		i = end
		switch name {
		case "script", "style", "head", "title", "blockquote":
			if !closing {
				i = skipElement(h, i, name)
			}
		case "br", "p", "div", "tr", "li", "pre", "table", "ul", "ol", "hr",
			"h1", "h2", "h3", "h4", "h5", "h6", "body":
			out = append(out, '\n')
		}
	}
	if bytes.IndexByte(out, '&') >= 0 {
		out = []byte(html.UnescapeString(string(out)))
	}
	return bytes.ReplaceAll(out, []byte("\u00a0"), []byte(" "))
}

// tag reads the tag starting at h[i] == '<': its lower-case name, whether it
// is a closing tag, and the index after its '>' (quotes in attributes
// respected). name is "" when this '<' does not start a tag.
func tag(h []byte, i int) (name string, closing bool, end int) {
	j := i + 1
	if j < len(h) && h[j] == '/' {
		closing = true
		j++
	}
	s := j
	for j < len(h) && (isAlpha(h[j]) || (j > s && '0' <= h[j] && h[j] <= '9')) {
		j++
	}
	if j == s {
		return "", false, i + 1
	}
	n := bytes.ToLower(h[s:j])
	var q byte
	for ; j < len(h); j++ {
		switch c := h[j]; {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '>':
			return string(n), closing, j + 1
		}
	}
	return string(n), closing, len(h)
}

// skipElement returns the index after the end tag that closes the element
// name opened just before i, counting nested elements of the same name.
func skipElement(h []byte, i int, name string) int {
	depth := 1
	for i < len(h) {
		j := bytes.IndexByte(h[i:], '<')
		if j < 0 {
			return len(h)
		}
		n, closing, end := tag(h, i+j)
		i = end
		if n != name {
			continue
		}
		if closing {
			depth--
			if depth == 0 {
				return end
			}
		} else {
			depth++
		}
	}
	return len(h)
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// unflow undoes format=flowed (RFC 3676 §4.2): a line ending in a space is
// joined to the next (the space dropped too when delsp=yes), and one
// leading "space-stuffing" space is removed. The signature line "-- " is
// not a flowed line.
func unflow(b []byte, delsp bool) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		e := lineEnd(b, i)
		l := trimEOL(b[i:e])
		if len(l) > 0 && l[0] == ' ' {
			l = l[1:]
		}
		soft := len(l) > 0 && l[len(l)-1] == ' ' && string(l) != "-- "
		if soft && delsp {
			l = l[:len(l)-1]
		}
		out = append(out, l...)
		if !soft && e > i && b[e-1] == '\n' {
			out = append(out, '\n')
		}
		i = e
	}
	return out
}
