package imapview

import (
	"context"
	"errors"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/envelopd/envelopd/store"
)

// session is one IMAP connection, logged in as one mailbox.
type session struct {
	s      *Server
	user   string // mailbox address, "" before login
	sel    *view  // selected folder, or nil
	conn   *imapConn
	remote string
	fails  int // failed logins in this session
}

// view is a session's window on a selected folder.
type view struct {
	f         *folder
	t         *imapserver.SessionTracker
	readOnly  bool
	searchRes imap.UIDSet
}

var _ imapserver.SessionIMAP4rev2 = (*session)(nil)

func (ss *session) ctx() context.Context { return ss.s.ctx }

func (ss *session) Close() error {
	ss.unselect()
	return nil
}

func (ss *session) unselect() {
	if ss.sel != nil {
		ss.sel.t.Close()
		ss.s.release(ss.sel.f)
		ss.sel = nil
	}
}

// Login implements imapserver.Session (guard.go has the checks).
func (ss *session) Login(username, password string) error {
	return ss.login("LOGIN", "", username, password)
}

func (ss *session) Select(name string, options *imap.SelectOptions) (*imap.SelectData, error) {
	ss.unselect()
	f, err := ss.s.open(ss.ctx(), ss.user, name)
	if err != nil {
		return nil, folderErr(err)
	}
	if err := f.refresh(ss.ctx()); err != nil {
		ss.s.release(f)
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ss.sel = &view{f: f, t: f.tracker.NewSession(), readOnly: options != nil && options.ReadOnly}
	return f.selectDataLocked(), nil
}

func (ss *session) Unselect() error {
	ss.unselect()
	return nil
}

func (ss *session) Create(name string, _ *imap.CreateOptions) error {
	return folderErr(ss.s.opts.Store.CreateFolder(ss.ctx(), ss.user, strings.TrimSuffix(name, "/")))
}

func (ss *session) Delete(name string) error {
	return folderErr(ss.s.opts.Store.DeleteFolder(ss.ctx(), ss.user, name))
}

func (ss *session) Rename(name, newName string, _ *imap.RenameOptions) error {
	return folderErr(ss.s.opts.Store.RenameFolder(ss.ctx(), ss.user, name, newName))
}

// Every folder counts as subscribed.
func (ss *session) Subscribe(string) error   { return nil }
func (ss *session) Unsubscribe(string) error { return nil }

func (ss *session) Namespace() (*imap.NamespaceData, error) {
	return &imap.NamespaceData{Personal: []imap.NamespaceDescriptor{{Delim: '/'}}}, nil
}

func (ss *session) List(w *imapserver.ListWriter, ref string, patterns []string, options *imap.ListOptions) error {
	if len(patterns) == 0 {
		// RFC 9051 §6.3.9: an empty pattern asks for the delimiter.
		return w.WriteList(&imap.ListData{Attrs: []imap.MailboxAttr{imap.MailboxAttrNoSelect}, Delim: '/'})
	}
	if _, err := ss.s.opts.Store.SyncFolders(ss.ctx(), ss.user); err != nil {
		return err
	}
	fs, err := ss.s.opts.Store.Folders(ss.ctx(), ss.user)
	if err != nil {
		return folderErr(err)
	}
	for _, f := range fs {
		match := false
		for _, p := range patterns {
			if imapserver.MatchList(f.Name, '/', ref, p) {
				match = true
				break
			}
		}
		if !match {
			continue
		}
		d := &imap.ListData{Mailbox: f.Name, Delim: '/', Attrs: []imap.MailboxAttr{imap.MailboxAttrSubscribed}}
		if f.Name == store.FolderSent {
			if options.SelectSpecialUse || options.ReturnSpecialUse {
				d.Attrs = append(d.Attrs, imap.MailboxAttrSent)
			}
		} else if options.SelectSpecialUse {
			continue
		}
		if options.ReturnStatus != nil {
			if d.Status, err = ss.status(f, options.ReturnStatus); err != nil {
				return err
			}
		}
		if err := w.WriteList(d); err != nil {
			return err
		}
	}
	return nil
}

func (ss *session) Status(name string, options *imap.StatusOptions) (*imap.StatusData, error) {
	if _, err := ss.s.opts.Store.SyncFolders(ss.ctx(), ss.user); err != nil {
		return nil, err
	}
	fs, err := ss.s.opts.Store.Folders(ss.ctx(), ss.user)
	if err != nil {
		return nil, folderErr(err)
	}
	for _, f := range fs {
		if f.Name == canonName(name) {
			return ss.status(f, options)
		}
	}
	return nil, errNoFolder
}

func (ss *session) status(f store.Folder, options *imap.StatusOptions) (*imap.StatusData, error) {
	d := &imap.StatusData{Mailbox: f.Name, UIDNext: imap.UID(f.UIDNext), UIDValidity: f.UIDValidity}
	ms, err := ss.s.opts.Store.FolderMessages(ss.ctx(), ss.user, f.Name, 0)
	if err != nil {
		return nil, err
	}
	n, unseen, deleted, size, recent := uint32(len(ms)), uint32(0), uint32(0), int64(0), uint32(0)
	for _, m := range ms {
		e := ss.s.newEntry(m)
		if !e.has(imap.FlagSeen) {
			unseen++
		}
		if e.has(imap.FlagDeleted) {
			deleted++
		}
		size += e.size
	}
	if options.NumMessages {
		d.NumMessages = &n
	}
	if options.NumUnseen {
		d.NumUnseen = &unseen
	}
	if options.NumDeleted {
		d.NumDeleted = &deleted
	}
	if options.Size {
		d.Size = &size
	}
	if options.NumRecent {
		d.NumRecent = &recent
	}
	return d, nil
}

// Append is refused: mail enters through SMTP, where it is verified.
func (ss *session) Append(string, imap.LiteralReader, *imap.AppendOptions) (*imap.AppendData, error) {
	return nil, &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot,
		Text: "APPEND is not supported: deliver mail through SMTP"}
}

func (ss *session) Poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	if ss.sel == nil {
		return nil
	}
	if err := ss.sel.f.refresh(ss.ctx()); err != nil {
		return err
	}
	return ss.sel.t.Poll(w, allowExpunge)
}

func (ss *session) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	if ss.sel == nil {
		<-stop
		return nil
	}
	// Server.watch refreshes selected folders on every store commit.
	if err := ss.sel.f.refresh(ss.ctx()); err != nil {
		return err
	}
	return ss.sel.t.Idle(w, stop)
}

func (ss *session) Expunge(w *imapserver.ExpungeWriter, uids *imap.UIDSet) error {
	v := ss.sel
	if v.readOnly {
		return errReadOnly
	}
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	gone := map[imap.UID]bool{}
	var list []uint32
	for _, e := range f.msgs {
		if e.has(imap.FlagDeleted) && (uids == nil || uids.Contains(e.uid)) {
			gone[e.uid] = true
			list = append(list, uint32(e.uid))
		}
	}
	if len(list) == 0 {
		return nil
	}
	if err := ss.s.opts.Store.Unfile(ss.ctx(), f.mailbox, f.name, list); err != nil {
		return err
	}
	f.removeLocked(gone)
	return nil
}

func (ss *session) Copy(numSet imap.NumSet, dest string) (*imap.CopyData, error) {
	data, _, err := ss.refile(numSet, dest, false)
	return data, err
}

func (ss *session) Move(w *imapserver.MoveWriter, numSet imap.NumSet, dest string) error {
	if ss.sel.readOnly {
		return errReadOnly
	}
	data, _, err := ss.refile(numSet, dest, true)
	if err != nil {
		return err
	}
	// The EXPUNGE responses follow from the tracker when the command
	// completes (imapserver polls before the tagged OK).
	if data == nil {
		return nil
	}
	return w.WriteCopyData(data)
}

// refile copies or moves the messages of numSet to dest in the store,
// then updates the loaded folders.
func (ss *session) refile(numSet imap.NumSet, dest string, move bool) (*imap.CopyData, []uint32, error) {
	f := ss.sel.f
	if canonName(dest) == f.name {
		return nil, nil, &imap.Error{Type: imap.StatusResponseTypeNo, Text: "Source and destination mailboxes are identical"}
	}
	f.mu.Lock()
	var uids []uint32
	ss.sel.forEachLocked(numSet, func(_ uint32, e *entry) { uids = append(uids, uint32(e.uid)) })
	if len(uids) == 0 {
		// Nothing to copy: no COPYUID (go-imap cannot encode empty sets;
		// it used to cut the reply short, then answer [SERVERBUG]).
		f.mu.Unlock()
		return nil, nil, nil
	}
	df, newUIDs, err := ss.s.opts.Store.Refile(ss.ctx(), f.mailbox, f.name, canonName(dest), uids, move)
	if err != nil {
		f.mu.Unlock()
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeTryCreate, Text: "No such mailbox"}
		}
		return nil, nil, err
	}
	data := &imap.CopyData{UIDValidity: df.UIDValidity}
	gone := map[imap.UID]bool{}
	for i, u := range uids {
		if newUIDs[i] != 0 {
			data.SourceUIDs.AddNum(imap.UID(u))
			data.DestUIDs.AddNum(imap.UID(newUIDs[i]))
			gone[imap.UID(u)] = true
		}
	}
	if move {
		f.removeLocked(gone)
	}
	f.mu.Unlock()
	if len(gone) == 0 {
		data = nil
	}
	if d := ss.s.loaded(f.mailbox, dest); d != nil {
		if err := d.refresh(ss.ctx()); err != nil {
			return nil, nil, err
		}
	}
	return data, newUIDs, nil
}

var errReadOnly = &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "Mailbox is read-only (EXAMINE)"}

// folderErr maps store errors to IMAP responses (RFC 5530 codes).
func folderErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return errNoFolder
	case errors.Is(err, store.ErrFolderExists):
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeAlreadyExists, Text: "Mailbox already exists"}
	case errors.Is(err, store.ErrFolderFixed):
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "INBOX cannot be deleted or renamed"}
	case errors.Is(err, store.ErrBadInput):
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "Bad mailbox name"}
	case errors.As(err, new(*imap.Error)):
		return err
	}
	return err
}
