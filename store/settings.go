package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SettingOutbound records how the last started serve or poll delivers the
// outbound queue: OutboundSmarthost, OutboundRelay, or OutboundNone (no
// worker: pending entries wait until a process with a smarthost runs).
const SettingOutbound = "outbound"

// Values of SettingOutbound.
const (
	OutboundSmarthost = "smarthost"
	OutboundRelay     = "relay"
	OutboundNone      = "none"
)

// SetSetting records key = value (now).
func (s settingRoom) SetSetting(ctx context.Context, key, value string) error {
	return s.write(ctx, func(tx Tx) error {
		_, err := tx.Exec(`INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			key, value, time.Now().UTC().UnixNano())
		if err != nil {
			return fmt.Errorf("store: set %s: %w", key, err)
		}
		return nil
	})
}

// Setting returns the value of key and when it was set; "" and the zero
// time when it never was.
func (s settingRoom) Setting(ctx context.Context, key string) (string, time.Time, error) {
	if s.isClosed() {
		return "", time.Time{}, ErrClosed
	}
	var v string
	var at int64
	err := s.r.QueryRowContext(ctx, `SELECT value, updated_at FROM settings WHERE key = ?`, key).Scan(&v, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("store: setting %s: %w", key, err)
	}
	return v, time.Unix(0, at).UTC(), nil
}
