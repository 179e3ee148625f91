package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// loadFlags are the generator and client flags run and compare share.
type loadFlags struct {
	sessions, messages, size int
	keepOpen, noPipelining   bool
	seed                     uint64
	rsaShare, attachShare    float64
	jsonOut                  bool
}

func (f *loadFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.sessions, "sessions", 10, "concurrent SMTP sessions")
	fs.IntVar(&f.messages, "messages", 20000, "messages to send in total")
	fs.IntVar(&f.size, "size", 2048, "approximate size of each mail in bytes")
	fs.BoolVar(&f.keepOpen, "keep-open", true, "keep each session's connection open (RSET between messages); false reconnects per message")
	fs.BoolVar(&f.noPipelining, "no-pipelining", false, "one command per round trip even if the server offers PIPELINING")
	fs.Uint64Var(&f.seed, "seed", 1, "content seed (types, amounts, attachments)")
	fs.Float64Var(&f.rsaShare, "rsa-share", 0.25, "share of mails signed with RSA-2048 (the rest Ed25519)")
	fs.Float64Var(&f.attachShare, "attach-share", 0.2, "share of mails with a tunnelled VCP or PVP JSON attachment")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as JSON")
}

func (f *loadFlags) generate(stderr io.Writer) (*Corpus, error) {
	t0 := time.Now()
	c, err := Generate(GenOptions{Messages: f.messages, Size: f.size, Seed: f.seed,
		RSAShare: f.rsaShare, AttachShare: f.attachShare})
	if err != nil {
		return nil, err
	}
	total := 0
	for i := range c.Mails {
		total += len(c.Mails[i].Data)
	}
	avg := 0
	if len(c.Mails) > 0 {
		avg = total / len(c.Mails)
	}
	fmt.Fprintf(stderr, "generated %d signed mails (run %s, average %d bytes) in %.1fs\n",
		len(c.Mails), c.RunID, avg, time.Since(t0).Seconds())
	return c, nil
}

// writeTXT writes the corpus's DKIM keys as a static key file.
func writeTXT(path string, c *Corpus) error {
	return os.WriteFile(path, []byte(strings.Join(c.TXT, "\n")+"\n"), 0o644)
}

func runLoad(ctx context.Context, e *env) int {
	fs := newFlags(e, "run")
	var f loadFlags
	f.register(fs)
	addr := fs.String("addr", "127.0.0.1:2525", "SMTP server address")
	record := fs.String("record", "", "append the Message-ID of every mail answered 250 to this file (fsynced)")
	txtOut := fs.String("dkim-txt-out", "", "write the run's DKIM keys here (static key file for envelopd serve --dkim-txt)")
	if err := fs.Parse(e.args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "envelopd-load run: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	c, err := f.generate(e.stderr)
	if err != nil {
		fmt.Fprintf(e.stderr, "envelopd-load run: %v\n", err)
		return 2
	}
	if *txtOut != "" {
		if err := writeTXT(*txtOut, c); err != nil {
			fmt.Fprintf(e.stderr, "envelopd-load run: %v\n", err)
			return 2
		}
	}
	opts := DriveOptions{Addr: *addr, Sessions: f.sessions, KeepOpen: f.keepOpen, NoPipelining: f.noPipelining}
	if *record != "" {
		rec, err := OpenRecorder(*record)
		if err != nil {
			fmt.Fprintf(e.stderr, "envelopd-load run: %v\n", err)
			return 2
		}
		opts.Record = rec
	}
	r := Drive(ctx, c.Mails, opts)
	if opts.Record != nil {
		if err := opts.Record.Close(); err != nil {
			fmt.Fprintf(e.stderr, "envelopd-load run: record: %v\n", err)
			return 2
		}
	}
	if f.jsonOut {
		json.NewEncoder(e.stdout).Encode(r)
	} else {
		printResult(e.stdout, "", r)
	}
	if r.Accepted != r.Messages {
		return 1
	}
	return 0
}

func printResult(w io.Writer, name string, r *Result) {
	if name != "" {
		name += ": "
	}
	mode := "sessions kept open"
	if !r.KeepOpen {
		mode = "reconnect per message"
	}
	fmt.Fprintf(w, "%s%d/%d accepted (%d rejected, %d failed) over %d sessions (%s) in %.2fs: %.0f msg/s",
		name, r.Accepted, r.Messages, r.Rejected, r.Failed, r.Sessions, mode, r.Seconds, r.MsgPerSec)
	if r.MaxMs > 0 { // smtp-source runs have no latencies
		fmt.Fprintf(w, "; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms", r.P50ms, r.P90ms, r.P99ms, r.MaxMs)
	}
	if r.ServerCPUSeconds > 0 && r.Accepted > 0 {
		n := float64(r.Accepted)
		fmt.Fprintf(w, "; CPU per message: server %.0f µs, client %.0f µs",
			r.ServerCPUSeconds/n*1e6, r.ClientCPUSeconds/n*1e6)
	}
	fmt.Fprintln(w)
	if r.FirstError != "" {
		fmt.Fprintf(w, "%sfirst error: %s\n", name, r.FirstError)
	}
}
