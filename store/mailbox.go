package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Relay mailboxes (Mailboxes in api.go). A mailbox's folders reference
// stored messages; UIDs come from folders.uid_next and UIDVALIDITY from
// mailboxes.next_validity, both persisted, so a client's cached UIDs stay
// valid across restarts (RFC 9051 §2.3.1.1: the pair UIDVALIDITY + UID
// must never name two different messages).

func checkMailbox(address string) error {
	if address == "" || strings.ToLower(address) != address {
		return fmt.Errorf("%w: mailbox address %q must be non-empty and lower case", ErrBadInput, address)
	}
	return nil
}

func checkFolder(name string) error {
	if name == "" || strings.ContainsAny(name, "\x00\r\n") {
		return fmt.Errorf("%w: folder name %q", ErrBadInput, name)
	}
	return nil
}

// canonFolder spells INBOX in upper case whatever its case (RFC 9051 §5.1:
// INBOX is case-insensitive); other names are kept as given.
func canonFolder(name string) string {
	if strings.EqualFold(name, FolderInbox) {
		return FolderInbox
	}
	return name
}

// ensureMailboxTx creates the mailbox and its fixed folders if missing.
func ensureMailboxTx(tx Tx, address string, now time.Time) (bool, error) {
	// The first UIDVALIDITY is the creation time in seconds: a mailbox
	// deleted by hand and created again does not reuse old values.
	res, err := tx.Exec(`INSERT INTO mailboxes (address, created_at, next_validity) VALUES (?, ?, ?)
		ON CONFLICT (address) DO NOTHING`, address, now.UnixNano(), now.Unix())
	if err != nil {
		return false, fmt.Errorf("store: create mailbox: %w", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return false, nil
	}
	for _, f := range []string{FolderInbox, FolderQuarantine, FolderSent} {
		if err := createFolderTx(tx, address, f); err != nil {
			return false, err
		}
	}
	return true, nil
}

func createFolderTx(tx Tx, mailbox, name string) error {
	var v int64
	err := tx.QueryRow(`UPDATE mailboxes SET next_validity = next_validity + 1 WHERE address = ?
		RETURNING next_validity - 1`, mailbox).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("mailbox %s: %w", mailbox, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: create folder: %w", err)
	}
	res, err := tx.Exec(`INSERT INTO folders (mailbox, name, uid_validity, uid_next) VALUES (?, ?, ?, 1)
		ON CONFLICT (mailbox, name) DO NOTHING`, mailbox, name, uint32(v))
	if err != nil {
		return fmt.Errorf("store: create folder: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("folder %s of %s: %w", name, mailbox, ErrFolderExists)
	}
	return nil
}

// EnsureMailbox implements Mailboxes.
func (s relayRoom) EnsureMailbox(ctx context.Context, address string) (bool, error) {
	if err := checkMailbox(address); err != nil {
		return false, err
	}
	// Most calls find it: answer from a reader without a write.
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM mailboxes WHERE address = ?`, address).Scan(&one)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		if s.isClosed() {
			return false, ErrClosed
		}
		return false, fmt.Errorf("store: mailbox: %w", err)
	}
	var created bool
	err = s.write(ctx, func(tx Tx) error {
		var err error
		created, err = ensureMailboxTx(tx, address, time.Now().UTC())
		return err
	})
	return created, err
}

// SetMailboxPassword implements Mailboxes.
func (s relayRoom) SetMailboxPassword(ctx context.Context, address, hash string) error {
	if err := checkMailbox(address); err != nil {
		return err
	}
	return s.write(ctx, func(tx Tx) error {
		if _, err := ensureMailboxTx(tx, address, time.Now().UTC()); err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE mailboxes SET password = ? WHERE address = ?`, hash, address); err != nil {
			return fmt.Errorf("store: set password: %w", err)
		}
		return nil
	})
}

// MailboxPassword implements Mailboxes.
func (s relayRoom) MailboxPassword(ctx context.Context, address string) (string, error) {
	if s.isClosed() {
		return "", ErrClosed
	}
	var h string
	err := s.r.QueryRowContext(ctx, `SELECT password FROM mailboxes WHERE address = ?`, address).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("mailbox %s: %w", address, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: mailbox password: %w", err)
	}
	return h, nil
}

// ListMailboxes implements Mailboxes.
func (s relayRoom) ListMailboxes(ctx context.Context) ([]Mailbox, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return queryAll(ctx, s.r, "mailboxes", func(sc scanner) (m Mailbox, err error) {
		err = sc.Scan(&m.Address, &m.HasPassword, unixTime{&m.CreatedAt}, &m.Messages)
		return m, err
	}, `SELECT b.address, b.password != '', b.created_at,
		(SELECT count(*) FROM messages m WHERE m.mailbox = b.address AND m.mailbox <> '')
		FROM mailboxes b ORDER BY b.address`)
}

// SyncFolders implements Mailboxes. A reader answers the common case
// (nothing new) without taking the writer; the filing itself re-reads the
// high-water mark inside the write, so concurrent syncs file each message
// once.
func (s relayRoom) SyncFolders(ctx context.Context, mailbox string) (int, error) {
	if s.isClosed() {
		return 0, ErrClosed
	}
	var pending int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM messages m, mailboxes b
		WHERE b.address = ? AND m.mailbox = b.address AND m.mailbox <> '' AND m.id > b.synced_id`, mailbox).Scan(&pending)
	if err != nil {
		return 0, fmt.Errorf("store: sync folders: %w", err)
	}
	if pending == 0 {
		return 0, nil
	}
	filed := 0
	err = s.write(ctx, func(tx Tx) error {
		var synced int64
		// FOR UPDATE (Postgres): a concurrent sync on another node waits
		// here and then files only what this one did not.
		if err := tx.QueryRow(`SELECT synced_id FROM mailboxes WHERE address = ?`+s.d.forUpdate, mailbox).Scan(&synced); err != nil {
			return fmt.Errorf("store: sync folders: %w", err)
		}
		q := `SELECT id, direction, status FROM messages m WHERE mailbox = ? AND mailbox <> '' AND id > ?`
		if s.d.visible != "" {
			q += " AND " + s.d.visible
		}
		rows, err := tx.Query(q+` ORDER BY id`, mailbox, synced)
		type item struct {
			id          int64
			dir, status string
		}
		var items []item
		if err := eachRow(rows, err, "store: sync folders", func(sc scanner) error {
			var it item
			err := sc.Scan(&it.id, &it.dir, &it.status)
			items = append(items, it)
			return err
		}); err != nil {
			return err
		}
		for _, it := range items {
			// A message's status is final when it is committed (Ingest
			// decides it in the same transaction), so filing by it is
			// safe.
			folder, flags := FolderInbox, ""
			switch {
			case it.dir == DirOut:
				folder, flags = FolderSent, `\Seen`
			case it.status != StatusAccepted:
				folder = FolderQuarantine
			}
			if _, err := fileTx(tx, mailbox, folder, it.id, flags, true); err != nil {
				return err
			}
			synced = it.id
			filed++
		}
		_, err = tx.Exec(`UPDATE mailboxes SET synced_id = ? WHERE address = ?`, synced, mailbox)
		return err
	})
	if err != nil {
		return 0, err
	}
	return filed, nil
}

// fileTx files stored message id in folder under the folder's next UID;
// create makes a missing fixed folder again (Sent deleted by a client).
func fileTx(tx Tx, mailbox, folder string, id int64, flags string, create bool) (uint32, error) {
	var uid int64
	err := tx.QueryRow(`UPDATE folders SET uid_next = uid_next + 1 WHERE mailbox = ? AND name = ?
		RETURNING uid_next - 1`, mailbox, folder).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) && create {
		if err := createFolderTx(tx, mailbox, folder); err != nil {
			return 0, err
		}
		return fileTx(tx, mailbox, folder, id, flags, false)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("folder %s of %s: %w", folder, mailbox, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: file message: %w", err)
	}
	if _, err := tx.Exec(`INSERT INTO folder_messages (mailbox, folder, uid, message_id, flags) VALUES (?, ?, ?, ?, ?)`,
		mailbox, folder, uid, id, flags); err != nil {
		return 0, fmt.Errorf("store: file message: %w", err)
	}
	return uint32(uid), nil
}

// Folders implements Mailboxes.
func (s relayRoom) Folders(ctx context.Context, mailbox string) ([]Folder, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	out, err := queryAll(ctx, s.r, "folders", func(sc scanner) (f Folder, err error) {
		return f, sc.Scan(&f.Name, &f.UIDValidity, &f.UIDNext, &f.Count)
	}, `SELECT f.name, f.uid_validity, f.uid_next,
		(SELECT count(*) FROM folder_messages x WHERE x.mailbox = f.mailbox AND x.folder = f.name)
		FROM folders f WHERE f.mailbox = ? ORDER BY f.name != 'INBOX', f.name`, mailbox)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mailbox %s: %w", mailbox, ErrNotFound)
	}
	return out, nil
}

// CreateFolder implements Mailboxes.
func (s relayRoom) CreateFolder(ctx context.Context, mailbox, name string) error {
	if err := checkFolder(name); err != nil {
		return err
	}
	return s.write(ctx, func(tx Tx) error { return createFolderTx(tx, mailbox, canonFolder(name)) })
}

// DeleteFolder implements Mailboxes: the folder and its references go; the
// stored messages stay.
func (s relayRoom) DeleteFolder(ctx context.Context, mailbox, name string) error {
	name = canonFolder(name)
	if name == FolderInbox {
		return ErrFolderFixed
	}
	return s.writeOne(ctx, "delete folder", "folder "+name+" of "+mailbox, `DELETE FROM folders WHERE mailbox = ? AND name = ?`, mailbox, name)
}

// RenameFolder implements Mailboxes. The folder keeps its UIDVALIDITY and
// UIDs (RFC 9051 §6.3.6).
func (s relayRoom) RenameFolder(ctx context.Context, mailbox, from, to string) error {
	from, to = canonFolder(from), canonFolder(to)
	if from == FolderInbox || to == FolderInbox {
		return ErrFolderFixed
	}
	if err := checkFolder(to); err != nil {
		return err
	}
	return s.write(ctx, func(tx Tx) error {
		var one int
		err := tx.QueryRow(`SELECT 1 FROM folders WHERE mailbox = ? AND name = ?`, mailbox, to).Scan(&one)
		if err == nil {
			return fmt.Errorf("folder %s of %s: %w", to, mailbox, ErrFolderExists)
		}
		return execOne(tx, "rename folder", "folder "+from+" of "+mailbox, `UPDATE folders SET name = ? WHERE mailbox = ? AND name = ?`, to, mailbox, from)
	})
}

// FolderMessages implements Mailboxes.
func (s relayRoom) FolderMessages(ctx context.Context, mailbox, folder string, afterUID uint32) ([]FolderMessage, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return queryAll(ctx, s.r, "folder messages", func(sc scanner) (fm FolderMessage, err error) {
		var flags, errs string
		var at int64
		var dkim, result []byte
		if err := sc.Scan(&fm.UID, &fm.ID, &flags, &fm.Size, &at,
			&fm.Direction, &fm.Status, &errs, &result, &dkim, &fm.AuthResults, &fm.Payment); err != nil {
			return fm, err
		}
		if fm.Errors, _, err = problemsOfRow(fm.ID, errs, "[]", result); err != nil {
			return fm, err
		}
		if len(dkim) > 0 {
			fm.DKIM = json.RawMessage(dkim)
		}
		fm.Flags = strings.Fields(flags)
		fm.ReceivedAt = time.Unix(0, at).UTC()
		return fm, nil
	}, `SELECT x.uid, x.message_id, x.flags, m.size, m.received_at,
		m.direction, m.status, m.errors, m.result, m.dkim, m.auth_results, coalesce(p.state, '')
		FROM folder_messages x JOIN messages m ON m.id = x.message_id LEFT JOIN payments p ON p.message_id = m.id
		WHERE x.mailbox = ? AND x.folder = ? AND x.uid > ? ORDER BY x.uid`, mailbox, canonFolder(folder), afterUID)
}

// SetFlags implements Mailboxes.
func (s relayRoom) SetFlags(ctx context.Context, mailbox, folder string, flags map[uint32][]string) error {
	folder = canonFolder(folder)
	for _, fs := range flags {
		for _, f := range fs {
			if f == "" || strings.ContainsAny(f, " \t\r\n\x00") {
				return fmt.Errorf("%w: flag %q", ErrBadInput, f)
			}
		}
	}
	return s.write(ctx, func(tx Tx) error {
		for uid, fs := range flags {
			fs = slices.Clone(fs)
			slices.Sort(fs)
			fs = slices.Compact(fs)
			if _, err := tx.Exec(`UPDATE folder_messages SET flags = ? WHERE mailbox = ? AND folder = ? AND uid = ?`,
				strings.Join(fs, " "), mailbox, folder, uid); err != nil {
				return fmt.Errorf("store: set flags: %w", err)
			}
		}
		return nil
	})
}

// Unfile implements Mailboxes.
func (s relayRoom) Unfile(ctx context.Context, mailbox, folder string, uids []uint32) error {
	folder = canonFolder(folder)
	return s.write(ctx, func(tx Tx) error {
		for _, uid := range uids {
			if _, err := tx.Exec(`DELETE FROM folder_messages WHERE mailbox = ? AND folder = ? AND uid = ?`,
				mailbox, folder, uid); err != nil {
				return fmt.Errorf("store: unfile: %w", err)
			}
		}
		return nil
	})
}

// Refile implements Mailboxes. A UID not in src is skipped (its new UID
// is 0).
func (s relayRoom) Refile(ctx context.Context, mailbox, src, dst string, uids []uint32, move bool) (Folder, []uint32, error) {
	src, dst = canonFolder(src), canonFolder(dst)
	var f Folder
	var out []uint32
	err := s.write(ctx, func(tx Tx) error {
		out = make([]uint32, len(uids))
		err := tx.QueryRow(`SELECT name, uid_validity FROM folders WHERE mailbox = ? AND name = ?`, mailbox, dst).
			Scan(&f.Name, &f.UIDValidity)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("folder %s of %s: %w", dst, mailbox, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: refile: %w", err)
		}
		for i, uid := range uids {
			var id int64
			var flags string
			err := tx.QueryRow(`SELECT message_id, flags FROM folder_messages WHERE mailbox = ? AND folder = ? AND uid = ?`,
				mailbox, src, uid).Scan(&id, &flags)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("store: refile: %w", err)
			}
			if out[i], err = fileTx(tx, mailbox, dst, id, flags, false); err != nil {
				return err
			}
			if move {
				if _, err := tx.Exec(`DELETE FROM folder_messages WHERE mailbox = ? AND folder = ? AND uid = ?`,
					mailbox, src, uid); err != nil {
					return fmt.Errorf("store: refile: %w", err)
				}
			}
		}
		return tx.QueryRow(`SELECT uid_next FROM folders WHERE mailbox = ? AND name = ?`, mailbox, dst).Scan(&f.UIDNext)
	})
	if err != nil {
		return Folder{}, nil, err
	}
	return f, out, nil
}
