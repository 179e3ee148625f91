package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// folderUIDs lists a folder as "uid:message-row-id" strings.
func folderUIDs(t *testing.T, s store.Mailboxes, mbox, folder string) []store.FolderMessage {
	t.Helper()
	ms, err := s.FolderMessages(context.Background(), mbox, folder, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func uidsOf(ms []store.FolderMessage) []uint32 {
	return each(ms, func(m store.FolderMessage) uint32 { return m.UID })
}

func idsOf(ms []store.FolderMessage) []int64 {
	return each(ms, func(m store.FolderMessage) int64 { return m.ID })
}

// testMailboxes checks relay mailboxes and their folder view: creation on
// first use, passwords, filing in INBOX/Sent with ascending UIDs, flags,
// EXPUNGE/MOVE/COPY semantics (the stored message stays), folder
// management, and UIDVALIDITY and UIDs surviving a restart.
func testMailboxes(t *testing.T, open func(t *testing.T) Relay) {
	ctx := context.Background()
	s := open(t)
	const bob = "bob@agents.test"

	if _, err := s.MailboxPassword(ctx, bob); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown mailbox password: %v, want ErrNotFound", err)
	}
	if _, err := s.Folders(ctx, bob); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown mailbox folders: %v, want ErrNotFound", err)
	}
	if _, err := s.EnsureMailbox(ctx, "Bob@agents.test"); !errors.Is(err, store.ErrBadInput) {
		t.Errorf("upper-case address: %v, want ErrBadInput", err)
	}
	for i, want := range []bool{true, false} {
		created, err := s.EnsureMailbox(ctx, bob)
		if err != nil || created != want {
			t.Fatalf("EnsureMailbox #%d: %v %v, want %v", i, created, err, want)
		}
	}
	if h, err := s.MailboxPassword(ctx, bob); err != nil || h != "" {
		t.Errorf("password before set: %q %v", h, err)
	}
	if err := s.SetMailboxPassword(ctx, "carol@agents.test", "hash-c"); err != nil {
		t.Fatal(err)
	}
	if h, err := s.MailboxPassword(ctx, "carol@agents.test"); err != nil || h != "hash-c" {
		t.Errorf("password: %q %v", h, err)
	}
	fs, err := s.Folders(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 3 || fs[0].Name != store.FolderInbox || fs[1].Name != store.FolderQuarantine || fs[2].Name != store.FolderSent ||
		fs[0].UIDNext != 1 || fs[0].UIDValidity == 0 || fs[0].UIDValidity == fs[1].UIDValidity || fs[1].UIDValidity == fs[2].UIDValidity {
		t.Fatalf("new mailbox folders %+v", fs)
	}
	validity := fs[0].UIDValidity

	// Two received, one sent copy, one for another mailbox.
	var ids []int64
	for _, m := range []*store.Incoming{
		msg("m1@x", "alice@agents.test", "e1", func(in *store.Incoming) { in.Mailbox = bob }),
		msg("m2@x", "alice@agents.test", "e2", func(in *store.Incoming) { in.Mailbox = bob }),
		msg("m3@x", bob, "e3", func(in *store.Incoming) { in.Mailbox = bob; in.Direction = store.DirOut }),
		msg("m4@x", "alice@agents.test", "e4", func(in *store.Incoming) { in.Mailbox = "carol@agents.test" }),
	} {
		out, err := s.Ingest(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	if n, err := s.SyncFolders(ctx, bob); err != nil || n != 3 {
		t.Fatalf("SyncFolders: %d %v, want 3", n, err)
	}
	if n, err := s.SyncFolders(ctx, bob); err != nil || n != 0 {
		t.Fatalf("second SyncFolders: %d %v, want 0", n, err)
	}
	inbox := folderUIDs(t, s, bob, "inbox")
	if !slices.Equal(uidsOf(inbox), []uint32{1, 2}) || !slices.Equal(idsOf(inbox), ids[:2]) {
		t.Fatalf("INBOX %+v, want UIDs 1 2 for rows %v", inbox, ids[:2])
	}
	if inbox[0].Size == 0 || inbox[0].ReceivedAt.IsZero() || len(inbox[0].Flags) != 0 {
		t.Errorf("INBOX entry %+v", inbox[0])
	}
	sent := folderUIDs(t, s, bob, store.FolderSent)
	if len(sent) != 1 || sent[0].ID != ids[2] || !slices.Equal(sent[0].Flags, []string{`\Seen`}) {
		t.Errorf("Sent %+v", sent)
	}

	// Flags, sorted and deduplicated.
	if err := s.SetFlags(ctx, bob, store.FolderInbox, map[uint32][]string{1: {`\Seen`, `\Deleted`, `\Seen`}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFlags(ctx, bob, store.FolderInbox, map[uint32][]string{1: {"bad flag"}}); !errors.Is(err, store.ErrBadInput) {
		t.Errorf("flag with space: %v", err)
	}
	inbox = folderUIDs(t, s, bob, store.FolderInbox)
	if !slices.Equal(inbox[0].Flags, []string{`\Deleted`, `\Seen`}) {
		t.Errorf("flags %v", inbox[0].Flags)
	}

	// Folders.
	if err := s.CreateFolder(ctx, bob, "Archive"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateFolder(ctx, bob, "Archive"); !errors.Is(err, store.ErrFolderExists) {
		t.Errorf("create twice: %v", err)
	}
	if err := s.DeleteFolder(ctx, bob, "inbox"); !errors.Is(err, store.ErrFolderFixed) {
		t.Errorf("delete INBOX: %v", err)
	}
	if err := s.RenameFolder(ctx, bob, "Archive", "Sent"); !errors.Is(err, store.ErrFolderExists) {
		t.Errorf("rename onto Sent: %v", err)
	}

	// MOVE 2 to Archive: new UID 1 there, gone from INBOX; COPY 1.
	f, newUIDs, err := s.Refile(ctx, bob, store.FolderInbox, "Archive", []uint32{2, 99}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(newUIDs, []uint32{1, 0}) || f.UIDNext != 2 || f.UIDValidity == 0 {
		t.Errorf("move: %+v %v", f, newUIDs)
	}
	if _, got, err := s.Refile(ctx, bob, store.FolderInbox, "Archive", []uint32{1}, false); err != nil || !slices.Equal(got, []uint32{2}) {
		t.Errorf("copy: %v %v", got, err)
	}
	if _, _, err := s.Refile(ctx, bob, store.FolderInbox, "Nowhere", []uint32{1}, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("move to unknown folder: %v", err)
	}
	if err := s.RenameFolder(ctx, bob, "Archive", "Done"); err != nil {
		t.Fatal(err)
	}
	done := folderUIDs(t, s, bob, "Done")
	if !slices.Equal(uidsOf(done), []uint32{1, 2}) || !slices.Equal(idsOf(done), []int64{ids[1], ids[0]}) {
		t.Errorf("renamed folder %+v", done)
	}
	if !slices.Equal(done[1].Flags, []string{`\Deleted`, `\Seen`}) {
		t.Errorf("copy lost flags: %v", done[1].Flags)
	}
	// EXPUNGE 1 from INBOX: the stored message stays.
	if err := s.Unfile(ctx, bob, store.FolderInbox, []uint32{1}); err != nil {
		t.Fatal(err)
	}
	if got := folderUIDs(t, s, bob, store.FolderInbox); len(got) != 0 {
		t.Errorf("INBOX after expunge %+v", got)
	}
	if _, err := s.Message(ctx, ids[0]); err != nil {
		t.Errorf("expunged message no longer stored: %v", err)
	}
	// A new message gets UID 3: UIDs are never reused.
	if _, err := s.Ingest(ctx, msg("m5@x", "alice@agents.test", "e5", func(in *store.Incoming) { in.Mailbox = bob })); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SyncFolders(ctx, bob); err != nil || n != 1 {
		t.Fatalf("SyncFolders: %d %v", n, err)
	}
	if got := uidsOf(folderUIDs(t, s, bob, store.FolderInbox)); !slices.Equal(got, []uint32{3}) {
		t.Errorf("INBOX UIDs %v, want [3]", got)
	}
	if err := s.DeleteFolder(ctx, bob, "Done"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteFolder(ctx, bob, "Done"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	mbs, err := s.ListMailboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mbs) != 2 || mbs[0].Address != bob || mbs[0].HasPassword || mbs[0].Messages != 4 ||
		mbs[1].Address != "carol@agents.test" || !mbs[1].HasPassword || mbs[1].Messages != 1 {
		t.Errorf("ListMailboxes %+v", mbs)
	}

	// Received mail that is not accepted goes to Quarantine, not INBOX:
	// a quarantined message and a duplicate (e1 again from
	// alice), each with its verdict for the view.
	for _, m := range []*store.Incoming{
		msg("q1@x", "alice@agents.test", "e6", func(in *store.Incoming) {
			in.Mailbox, in.Status, in.AuthResults = bob, store.StatusQuarantined, "mx.test; dkim=none"
			in.Errors = protocols.Problems{{Code: protocols.CodeDKIMFailed, Message: "bad"}}
		}),
		msg("q2@x", "alice@agents.test", "e1", func(in *store.Incoming) { in.Mailbox = bob }),
	} {
		if _, err := s.Ingest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.SyncFolders(ctx, bob); err != nil || n != 2 {
		t.Fatalf("SyncFolders: %d %v, want 2", n, err)
	}
	if got := uidsOf(folderUIDs(t, s, bob, store.FolderInbox)); !slices.Equal(got, []uint32{3}) {
		t.Errorf("INBOX UIDs %v after quarantined mail, want [3]", got)
	}
	q := folderUIDs(t, s, bob, store.FolderQuarantine)
	if !slices.Equal(uidsOf(q), []uint32{1, 2}) {
		t.Fatalf("Quarantine %+v, want UIDs 1 2", q)
	}
	if q[0].Status != store.StatusQuarantined || q[0].Direction != store.DirIn || q[0].AuthResults != "mx.test; dkim=none" ||
		len(q[0].Errors) != 1 || q[0].Errors[0].Code != protocols.CodeDKIMFailed {
		t.Errorf("Quarantine 1: %+v", q[0])
	}
	if q[1].Status != store.StatusDuplicate || len(q[1].Errors) != 1 || q[1].Errors[0].Code != protocols.CodeDuplicateID {
		t.Errorf("Quarantine 2: %+v", q[1])
	}
	s.Close()

	// Restart: same UIDVALIDITY, same UIDs, UIDNEXT kept.
	s = open(t)
	defer s.Close()
	fs, err = s.Folders(ctx, bob)
	if err != nil {
		t.Fatal(err)
	}
	if fs[0].Name != store.FolderInbox || fs[0].UIDValidity != validity || fs[0].UIDNext != 4 || fs[0].Count != 1 {
		t.Errorf("INBOX after restart %+v, want validity %d, next 4, 1 message", fs[0], validity)
	}
}
