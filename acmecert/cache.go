package acmecert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrCacheMiss: the cache has nothing under the key.
var ErrCacheMiss = errors.New("acmecert: cache miss")

// Cache keeps the account key, the certificate and the HTTP-01 key
// authorizations (the shape of autocert.Cache).
type Cache interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
}

// DirCache is a directory of files, one per key (mode 0600).
type DirCache string

// OpenDirCache creates dir (0700) when needed and checks that a file can
// be written in it: an unwritable cache is refused at start, not at the
// first renewal.
func OpenDirCache(dir string) (DirCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("acmecert: cache dir: %w", err)
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return "", fmt.Errorf("acmecert: cache dir %s is not writable: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return DirCache(dir), nil
}

func (d DirCache) path(key string) string {
	return filepath.Join(string(d), strings.NewReplacer("/", "_", ":", "_", "\\", "_").Replace(key))
}

// Get implements Cache.
func (d DirCache) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(d.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrCacheMiss
	}
	return b, err
}

// Put implements Cache (write to a temporary file, then rename).
func (d DirCache) Put(ctx context.Context, key string, data []byte) error {
	f, err := os.CreateTemp(string(d), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), d.path(key))
}

// Delete implements Cache.
func (d DirCache) Delete(ctx context.Context, key string) error {
	if err := os.Remove(d.path(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Settings is the store's key-value settings (store.DB has them, on
// SQLite and Postgres).
type Settings interface {
	SetSetting(ctx context.Context, key, value string) error
	Setting(ctx context.Context, key string) (string, time.Time, error)
}

// KeyClaimer is the optional ability of a Settings store to keep the
// first of several values offered for one key (store.StateStore has it);
// StoreCache.Claim uses it when the store has it.
type KeyClaimer interface {
	PutKeyIfAbsent(ctx context.Context, protocol, handle, key string) (string, error)
}

// StoreCache keeps the cache in the store's settings under "acme:KEY":
// every node on one Postgres database shares one account and one
// certificate. Values are PEM or ASCII; an empty value is a deleted key.
type StoreCache struct{ Store Settings }

// Get implements Cache.
func (c StoreCache) Get(ctx context.Context, key string) ([]byte, error) {
	v, _, err := c.Store.Setting(ctx, "acme:"+key)
	if err != nil {
		return nil, err
	}
	if v == "" {
		return nil, ErrCacheMiss
	}
	return []byte(v), nil
}

// Put implements Cache.
func (c StoreCache) Put(ctx context.Context, key string, data []byte) error {
	return c.Store.SetSetting(ctx, "acme:"+key, string(data))
}

// Delete implements Cache.
func (c StoreCache) Delete(ctx context.Context, key string) error {
	return c.Store.SetSetting(ctx, "acme:"+key, "")
}

// Claimer is a cache several processes share that can say which one
// renews: Claim stores owner under key unless a claim is there, and
// returns the claim that stands (the first writer's, on any node).
type Claimer interface {
	Claim(ctx context.Context, key, owner string) (string, error)
}

// Claim implements Claimer over the store's keys (INSERT … ON CONFLICT
// DO NOTHING: one winner however many nodes ask); a store without them
// lets every claimant win.
func (c StoreCache) Claim(ctx context.Context, key, owner string) (string, error) {
	p, ok := c.Store.(KeyClaimer)
	if !ok {
		return owner, nil
	}
	return p.PutKeyIfAbsent(ctx, "acme-claim", key, owner)
}
