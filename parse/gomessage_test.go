package parse

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-message"
)

// TestAgainstGoMessage checks the zero-copy MIME reader against go-message
// on every corpus mail that go-message reads without error: the same
// leaves, in the same order, with the same media types and the same
// decoded content (transfer encoding undone; text/* also converted to
// UTF-8, as go-message does).
func TestAgainstGoMessage(t *testing.T) {
	compared := 0
	for _, file := range corpus(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := goMessageLeaves(raw)
		if !ok {
			continue // go-message gives up on this one; the corpus golden covers it
		}
		h, body, _ := readHeader(raw)
		var w walker
		w.walk(h, body, 0, "text/plain")
		if len(w.parts) != len(want) {
			t.Errorf("%s: %d leaves, go-message %d", filepath.Base(file), len(w.parts), len(want))
			continue
		}
		for i, p := range w.parts {
			got, _ := decodeTransfer(p.raw, p.cte)
			if strings.HasPrefix(p.mediaType, "text/") {
				got, _ = toUTF8(got, p.params.charset)
			}
			if p.mediaType != want[i].mediaType || !bytes.Equal(got, want[i].data) {
				t.Errorf("%s: leaf %d: %s %q\ngo-message: %s %q", filepath.Base(file), i, p.mediaType, got, want[i].mediaType, want[i].data)
			}
		}
		compared++
	}
	t.Logf("%d corpus mails compared", compared)
	if compared < 60 {
		t.Errorf("only %d corpus mails compared", compared)
	}
}

type gmLeaf struct {
	mediaType string
	data      []byte
}

func goMessageLeaves(raw []byte) ([]gmLeaf, bool) {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil {
		return nil, false
	}
	var out []gmLeaf
	ok := true
	var walk func(e *message.Entity)
	walk = func(e *message.Entity) {
		if mr := e.MultipartReader(); mr != nil {
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					ok = false
					return
				}
				walk(p)
			}
		}
		mt, _, _ := e.Header.ContentType()
		if mt == "" {
			mt = "text/plain"
		}
		data, err := io.ReadAll(e.Body)
		if err != nil {
			ok = false
		}
		out = append(out, gmLeaf{mt, data})
	}
	walk(e)
	return out, ok
}
