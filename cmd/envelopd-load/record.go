package main

import (
	"bufio"
	"os"
	"strings"
	"sync"
)

// Recorder appends the Message-IDs of accepted mails to a file, one per
// line, and fsyncs as it goes: a line in the file is a mail that was
// answered 250, whatever happens to either process afterwards. Writes are
// grouped (one write and one fsync for all ids that arrived meanwhile) so
// recording does not slow the sessions down.
type Recorder struct {
	f    *os.File
	mu   sync.Mutex
	cond *sync.Cond
	buf  []string
	done bool
	err  error
	wg   sync.WaitGroup
}

// OpenRecorder opens (creating or appending to) path.
func OpenRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	r := &Recorder{f: f}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Add(1)
	go r.loop()
	return r, nil
}

// Add queues id for writing.
func (r *Recorder) Add(id string) {
	r.mu.Lock()
	r.buf = append(r.buf, id)
	r.mu.Unlock()
	r.cond.Signal()
}

func (r *Recorder) loop() {
	defer r.wg.Done()
	var b strings.Builder
	for {
		r.mu.Lock()
		for len(r.buf) == 0 && !r.done {
			r.cond.Wait()
		}
		batch, done := r.buf, r.done
		r.buf = nil
		r.mu.Unlock()
		if len(batch) > 0 {
			b.Reset()
			for _, id := range batch {
				b.WriteString(id)
				b.WriteByte('\n')
			}
			_, err := r.f.WriteString(b.String())
			if err == nil {
				err = r.f.Sync()
			}
			if err != nil {
				r.mu.Lock()
				if r.err == nil {
					r.err = err
				}
				r.mu.Unlock()
			}
		}
		if done && len(batch) == 0 {
			return
		}
	}
}

// Close writes what is queued, fsyncs and closes; it reports the first
// write error.
func (r *Recorder) Close() error {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.cond.Signal()
	r.wg.Wait()
	err := r.f.Close()
	if r.err != nil {
		return r.err
	}
	return err
}

// ReadRecord reads a record file: the Message-IDs in it, in order.
func ReadRecord(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			ids = append(ids, s)
		}
	}
	return ids, sc.Err()
}
