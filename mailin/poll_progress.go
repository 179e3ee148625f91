package mailin

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Progress draws one status line ("N of M" per mailbox importing a large
// backlog) on a terminal, rewritten in place with \r. The command creates
// it only when standard error is a terminal.
type Progress struct {
	W io.Writer

	mu    sync.Mutex
	items map[string][2]int
	width int
}

// Set records that key has done n of total and redraws the line.
func (pr *Progress) Set(key string, n, total int) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.items == nil {
		pr.items = map[string][2]int{}
	}
	pr.items[key] = [2]int{n, total}
	pr.draw()
}

// Done removes key; the line is cleared when nothing is left.
func (pr *Progress) Done(key string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	delete(pr.items, key)
	pr.draw()
}

func (pr *Progress) draw() {
	keys := make([]string, 0, len(pr.items))
	for k := range pr.items {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := pr.items[k]
		parts[i] = fmt.Sprintf("%s: %d of %d", k, v[0], v[1])
	}
	line := strings.Join(parts, " · ")
	pad := ""
	if n := pr.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(pr.W, "\r%s%s\r%s", line, pad, line)
	pr.width = len(line)
	if len(keys) == 0 {
		fmt.Fprint(pr.W, "\r")
	}
}
