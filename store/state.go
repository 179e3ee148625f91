package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// IMAPState implements Store. An unknown key is not an error: it returns
// 0, 0 (nothing seen yet).
func (s stateRoom) IMAPState(ctx context.Context, key string) (uint32, uint32, error) {
	if s.isClosed() {
		return 0, 0, ErrClosed
	}
	var v, u int64
	err := s.r.QueryRowContext(ctx, `SELECT uid_validity, last_uid FROM imap_state WHERE key = ?`, key).Scan(&v, &u)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("store: imap state: %w", err)
	}
	return uint32(v), uint32(u), nil
}

// SetIMAPState implements Store.
func (s stateRoom) SetIMAPState(ctx context.Context, key string, uidValidity, lastUID uint32) error {
	return s.write(ctx, func(tx Tx) error {
		_, err := tx.Exec(`INSERT INTO imap_state (key, uid_validity, last_uid) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET uid_validity = excluded.uid_validity, last_uid = excluded.last_uid`,
			key, int64(uidValidity), int64(lastUID))
		if err != nil {
			return fmt.Errorf("store: set imap state: %w", err)
		}
		return nil
	})
}

// PutKey implements Store: it adds or replaces the key of (protocol, handle).
func (s stateRoom) PutKey(ctx context.Context, protocol, handle, key string) error {
	if protocol == "" || handle == "" {
		return fmt.Errorf("%w: key without protocol or handle", ErrBadInput)
	}
	return s.write(ctx, func(tx Tx) error {
		_, err := tx.Exec(`INSERT INTO protocol_keys (protocol, handle, key) VALUES (?, ?, ?)
			ON CONFLICT (protocol, handle) DO UPDATE SET key = excluded.key`, protocol, handle, s.d.key(key))
		if err != nil {
			return fmt.Errorf("store: put key: %w", err)
		}
		return nil
	})
}

// PutKeyIfAbsent stores key for (protocol, handle) unless one is there
// already, and returns the stored one: the first writer wins, on any node
// (INSERT … ON CONFLICT DO NOTHING), so that nodes starting together and
// each generating a key all end up using one (relay DKIM keys).
func (s stateRoom) PutKeyIfAbsent(ctx context.Context, protocol, handle, key string) (string, error) {
	if protocol == "" || handle == "" {
		return "", fmt.Errorf("%w: key without protocol or handle", ErrBadInput)
	}
	var stored string
	err := s.write(ctx, func(tx Tx) error {
		if _, err := tx.Exec(`INSERT INTO protocol_keys (protocol, handle, key) VALUES (?, ?, ?)
			ON CONFLICT (protocol, handle) DO NOTHING`, protocol, handle, s.d.key(key)); err != nil {
			return fmt.Errorf("store: put key: %w", err)
		}
		if err := tx.QueryRow(`SELECT key FROM protocol_keys WHERE protocol = ? AND handle = ?`, protocol, handle).Scan(&stored); err != nil {
			return fmt.Errorf("store: put key: %w", err)
		}
		return nil
	})
	return stored, err
}

// Keys implements Store: handle → key for protocol (empty map when none).
func (s stateRoom) Keys(ctx context.Context, protocol string) (map[string]string, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	m := map[string]string{}
	rows, err := s.r.QueryContext(ctx, `SELECT handle, key FROM protocol_keys WHERE protocol = ?`, protocol)
	err = eachRow(rows, err, "store: keys", func(sc scanner) error {
		var h, k string
		err := sc.Scan(&h, &k)
		m[h] = k
		return err
	})
	return m, err
}

// ChainTip implements Store: the highest link of chain in any scope
// (direction, mailbox), which is what a signer continues from.
func (s stateRoom) ChainTip(ctx context.Context, chain string) (int64, string, error) {
	if s.isClosed() {
		return 0, "", ErrClosed
	}
	return scanTip(s.r.QueryRowContext(ctx, `SELECT seq, hash FROM chain_links WHERE chain = ? ORDER BY seq DESC LIMIT 1`, chain), "chain tip")
}
