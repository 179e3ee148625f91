package imapview

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/envelopd/envelopd/store"
)

// folder is the state of one selected folder shared by the sessions that
// have it selected: the UID list mirrored from the store and the tracker
// that turns changes into untagged responses (EXISTS, EXPUNGE, FETCH
// FLAGS) for each session. Every change is written to the store first,
// then applied here under mu.
type folder struct {
	s             *Server
	mailbox, name string
	validity      uint32
	tracker       *imapserver.MailboxTracker
	refs          int // guarded by Server.mu
	mu            sync.Mutex
	uidNext       uint32
	msgs          []*entry // UID order; index+1 is the sequence number
}

// entry is one message of a folder: its UID, the stored message it
// references, and its flags (canonical spelling). The view serves head
// (verdictHeader) followed by the stored bytes; size is of both.
type entry struct {
	uid   imap.UID
	id    int64
	flags []imap.Flag
	size  int64
	t     time.Time
	head  []byte
}

func (s *Server) newEntry(m store.FolderMessage) *entry {
	head := verdictHeader(s.opts.Hostname, m)
	e := &entry{uid: imap.UID(m.UID), id: m.ID, size: int64(len(head) + m.Size), t: m.ReceivedAt, head: head}
	for _, f := range m.Flags {
		e.flags = append(e.flags, imap.Flag(f))
	}
	return e
}

func (e *entry) has(f imap.Flag) bool {
	c := canonFlag(f)
	return slices.Contains(e.flags, c)
}

func (e *entry) flagStrings() []string {
	out := make([]string, len(e.flags))
	for i, f := range e.flags {
		out[i] = string(f)
	}
	return out
}

// systemFlags are spelled as in RFC 9051 §2.3.2 whatever case a client
// uses; keywords are kept lower case (flags are case-insensitive).
var systemFlags = []imap.Flag{imap.FlagSeen, imap.FlagAnswered, imap.FlagFlagged, imap.FlagDeleted, imap.FlagDraft}

func canonFlag(f imap.Flag) imap.Flag {
	for _, s := range systemFlags {
		if strings.EqualFold(string(f), string(s)) {
			return s
		}
	}
	return imap.Flag(strings.ToLower(string(f)))
}

// applyFlags returns e's flags after a STORE operation, sorted.
func applyFlags(cur []imap.Flag, st *imap.StoreFlags) []imap.Flag {
	out := []imap.Flag{}
	if st.Op != imap.StoreFlagsSet {
		out = append(out, cur...)
	}
	for _, f := range st.Flags {
		c := canonFlag(f)
		if c == imap.Flag(`\recent`) {
			continue // RFC 9051 §2.3.2: \Recent cannot be set by a client
		}
		switch st.Op {
		case imap.StoreFlagsDel:
			out = slices.DeleteFunc(out, func(x imap.Flag) bool { return x == c })
		default:
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out
}

// refresh files new messages (SyncFolders) and appends those of this
// folder beyond the last known UID, announcing them with EXISTS.
func (f *folder) refresh(ctx context.Context) error {
	st := f.s.opts.Store
	if _, err := st.SyncFolders(ctx, f.mailbox); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var last uint32
	if n := len(f.msgs); n > 0 {
		last = uint32(f.msgs[n-1].uid)
	}
	ms, err := st.FolderMessages(ctx, f.mailbox, f.name, last)
	if err != nil || len(ms) == 0 {
		return err
	}
	for _, m := range ms {
		f.msgs = append(f.msgs, f.s.newEntry(m))
		f.uidNext = max(f.uidNext, m.UID+1)
	}
	f.tracker.QueueNumMessages(uint32(len(f.msgs)))
	return nil
}

// removeLocked drops the entries with the given UIDs and queues an
// EXPUNGE per removed message for every session, highest sequence number
// first so that each number is valid when it is sent.
func (f *folder) removeLocked(uids map[imap.UID]bool) {
	for i := len(f.msgs) - 1; i >= 0; i-- {
		if uids[f.msgs[i].uid] {
			f.msgs = slices.Delete(f.msgs, i, i+1)
			f.tracker.QueueExpunge(uint32(i) + 1)
		}
	}
}

func (f *folder) selectDataLocked() *imap.SelectData {
	seen := map[imap.Flag]bool{}
	var flags []imap.Flag
	for _, s := range systemFlags {
		seen[s] = true
		flags = append(flags, s)
	}
	var firstUnseen uint32
	for i, e := range f.msgs {
		for _, fl := range e.flags {
			if !seen[fl] {
				seen[fl] = true
				flags = append(flags, fl)
			}
		}
		if firstUnseen == 0 && !e.has(imap.FlagSeen) {
			firstUnseen = uint32(i) + 1
		}
	}
	perm := append(slices.Clone(flags), imap.FlagWildcard)
	return &imap.SelectData{
		Flags:             flags,
		PermanentFlags:    perm,
		NumMessages:       uint32(len(f.msgs)),
		FirstUnseenSeqNum: firstUnseen,
		UIDNext:           imap.UID(f.uidNext),
		UIDValidity:       f.validity,
	}
}
