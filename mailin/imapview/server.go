// Package imapview serves the relay mailboxes of a store over IMAP (RFC
// 9051 / RFC 3501 with MOVE, RFC 6851, and IDLE, RFC 2177) with go-imap/v2's
// imapserver: the folders, UIDs and flags live in the store (store.Mailboxes)
// and FETCH reads each message's raw bytes from the store, exactly as
// stored — there is no second copy of the mail. An agent under test can
// point `envelopd poll` or any IMAP client at it.
//
// The view is honest about what envelopd found: INBOX holds
// accepted mail only, received mail that is quarantined or a duplicate
// is in Quarantine (store.SyncFolders files it), and every message is
// served with an Authentication-Results field (RFC 8601, authserv-id
// Options.Hostname) and envelopd's X-Envelopd-Status field prepended to
// the stored bytes (verdictHeader); sizes, offsets and SEARCH are of the
// bytes served.
//
// Supported: LOGIN and AUTHENTICATE PLAIN (checked by Options.Authenticate),
// LIST, STATUS, SELECT/EXAMINE, FETCH, SEARCH (flags, UID and sequence
// sets, dates, size, header and text matches), STORE, EXPUNGE and UID
// EXPUNGE, COPY, MOVE, IDLE, CREATE/DELETE/RENAME of folders. APPEND is
// refused: mail enters through SMTP so that every message is verified and
// checked like any other. EXPUNGE removes a message from the folder view;
// the stored message and its dedup facts stay. The structure follows
// imapmemserver (go-imap's in-memory model server).
package imapview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/envelopd/envelopd/authguard"
	"github.com/envelopd/envelopd/connlimit"
	"github.com/envelopd/envelopd/store"
)

// Options configure a Server.
type Options struct {
	Store store.Store
	// Authenticate checks a mailbox's password (mailin.Relay.Authenticate).
	Authenticate func(user, pass string) error
	// Hostname is the authserv-id of the Authentication-Results field
	// the view prepends to every message (serve --hostname).
	Hostname string
	Logger   *slog.Logger

	// Guard throttles and bounds password checks (share the SMTP front
	// ends' one); nil: authguard.New(0, Logger, nil).
	Guard *authguard.Guard
	// MaxConnections (default 100) and MaxConnectionsPerIP (default 20)
	// cap concurrent connections; more get "* BYE" at connect. < 0: none.
	MaxConnections, MaxConnectionsPerIP int
	// MaxIdleCommands is how many command lines a session may send before
	// it logs in (default 20; < 0: no limit).
	MaxIdleCommands int
}

// Server is the IMAP view of a store.
type Server struct {
	opts  Options
	srv   *imapserver.Server
	guard *authguard.Guard

	mu      sync.Mutex
	folders map[folderKey]*folder // folders selected by at least one session

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

type folderKey struct{ mailbox, name string }

// New returns a Server; Serve starts it on a listener.
func New(opts Options) *Server {
	s := &Server{opts: opts, folders: map[folderKey]*folder{}, done: make(chan struct{}), guard: opts.Guard}
	if s.guard == nil {
		s.guard = authguard.New(0, opts.Logger, nil)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.srv = imapserver.New(&imapserver.Options{
		NewSession: func(c *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			nc := c.NetConn()
			ic, _ := nc.(*imapConn)
			return &session{s: s, conn: ic, remote: nc.RemoteAddr().String()}, nil, nil
		},
		Caps: imap.CapSet{
			imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}, imap.CapIdle: {},
			imap.CapMove: {}, imap.CapUIDPlus: {}, imap.CapNamespace: {},
		},
		Logger:       logPrinter{s.log()},
		InsecureAuth: true, // loopback test relay; see serve --imap
	})
	go s.watch()
	return s
}

// Serve answers IMAP connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	def := func(v, d int) int {
		if v == 0 {
			return d
		}
		return max(v, 0)
	}
	ln = &imapListener{maxIdle: def(s.opts.MaxIdleCommands, 20), Listener: &connlimit.Listener{Listener: ln,
		Max: def(s.opts.MaxConnections, 100), PerIP: def(s.opts.MaxConnectionsPerIP, 20), Refuse: imapRefusal,
		Refused: func(r connlimit.Reason, remote string) {
			s.log().Info("imap connection refused", "reason", string(r), "remote", remote)
		}}}
	err := s.srv.Serve(ln)
	if s.ctx.Err() != nil {
		return nil
	}
	return err
}

// Close stops the server and closes every connection.
func (s *Server) Close() error {
	s.cancel()
	err := s.srv.Close()
	<-s.done
	return err
}

func (s *Server) log() *slog.Logger {
	if s.opts.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.opts.Logger
}

// watch refreshes the selected folders whenever the store commits new
// messages, so that IDLE sessions see new mail at once.
func (s *Server) watch() {
	defer close(s.done)
	var after int64
	if ms, err := s.opts.Store.Messages(s.ctx, store.Filter{Newest: true, Limit: 1}); err == nil && len(ms) > 0 {
		after = ms[0].ID
	}
	for {
		if err := s.opts.Store.WaitNew(s.ctx, after); err != nil {
			if s.ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return
			}
			select {
			case <-time.After(time.Second):
				continue
			case <-s.ctx.Done():
				return
			}
		}
		if ms, err := s.opts.Store.Messages(s.ctx, store.Filter{Newest: true, Limit: 1}); err == nil && len(ms) > 0 {
			after = ms[0].ID
		}
		s.mu.Lock()
		fs := make([]*folder, 0, len(s.folders))
		for _, f := range s.folders {
			fs = append(fs, f)
		}
		s.mu.Unlock()
		for _, f := range fs {
			if err := f.refresh(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log().Warn("imap view: refresh", "mailbox", f.mailbox, "folder", f.name, "err", err)
			}
		}
	}
}

// open returns the shared state of a folder, loading it on first use;
// release gives it back.
func (s *Server) open(ctx context.Context, mailbox, name string) (*folder, error) {
	if _, err := s.opts.Store.SyncFolders(ctx, mailbox); err != nil {
		return nil, err
	}
	fs, err := s.opts.Store.Folders(ctx, mailbox)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(fs, func(f store.Folder) bool { return f.Name == canonName(name) })
	if i < 0 {
		return nil, errNoFolder
	}
	key := folderKey{mailbox, fs[i].Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.folders[key]; ok && f.validity == fs[i].UIDValidity {
		f.refs++
		return f, nil
	}
	ms, err := s.opts.Store.FolderMessages(ctx, mailbox, fs[i].Name, 0)
	if err != nil {
		return nil, err
	}
	f := &folder{s: s, mailbox: mailbox, name: fs[i].Name, validity: fs[i].UIDValidity, uidNext: fs[i].UIDNext, refs: 1}
	for _, m := range ms {
		f.msgs = append(f.msgs, s.newEntry(m))
	}
	f.tracker = imapserver.NewMailboxTracker(uint32(len(f.msgs)))
	s.folders[key] = f
	return f, nil
}

func (s *Server) release(f *folder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.refs--
	key := folderKey{f.mailbox, f.name}
	if f.refs <= 0 && s.folders[key] == f {
		delete(s.folders, key)
	}
}

// loaded returns the shared state of a folder if some session has it
// selected.
func (s *Server) loaded(mailbox, name string) *folder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.folders[folderKey{mailbox, canonName(name)}]
}

func canonName(name string) string {
	if strings.EqualFold(name, store.FolderInbox) {
		return store.FolderInbox
	}
	return name
}

var errNoFolder = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNonExistent, Text: "No such mailbox"}

type logPrinter struct{ l *slog.Logger }

func (p logPrinter) Printf(format string, args ...any) {
	p.l.Warn("imap view", "msg", strings.TrimSpace(fmt.Sprintf(format, args...)))
}
