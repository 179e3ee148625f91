package store

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// MigrateTo exposes migrate for the migration test: it brings the database
// at dsn to version v only.
func MigrateTo(ctx context.Context, path string, v int) error {
	db, err := sql.Open("sqlite", dsn(path, 5000e6, true))
	if err != nil {
		return err
	}
	defer db.Close()
	return migrate(ctx, db, v)
}

// PGMigrateTo brings the Postgres database at dsn to version v only and
// returns it open, for the migration tests.
func PGMigrateTo(ctx context.Context, dsn string, v int) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	if err := pgMigrateTo(ctx, db, v); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// SetProofBatch sets how many old proofs migration 18 reads at once and
// returns the previous value.
func SetProofBatch(n int64) int64 { return proofBatch.Swap(n) }

// SetCommonMatches sets how many matches make a search common (a thread
// search then probes the index per thread) and returns the previous
// value.
func SetCommonMatches(n int64) int64 { return commonMatches.Swap(n) }

// EncodeRaw is how the store encodes raw bytes (the stored bytes and
// their codec), for tests that write rows as an older build did.
func EncodeRaw(raw []byte) ([]byte, int) { return raws.encode(raw) }

// SetCommonShare sets the share of the indexed messages (ten-thousandths)
// from which a Postgres search word is common and returns the previous
// value.
func SetCommonShare(n int64) int64 { return commonShare.Swap(n) }

// SearchDrive returns the words of text a search on db asks its index for
// (nil: all of them).
func SearchDrive(ctx context.Context, db DB, text string) ([]string, error) {
	p, ok := db.(*Postgres)
	if !ok {
		return nil, nil
	}
	return p.indexRoom.searchDrive(ctx, text)
}

// EncodeRawDict is how a backend that asks for the mail dictionary
// (Postgres) encodes raw bytes.
func EncodeRawDict(raw []byte) ([]byte, int) { return raws.encodeRaw(raw, true) }

// CorpusMail is every .eml of testdata as it arrives over SMTP (CRLF).
func CorpusMail(t testing.TB) [][]byte {
	mails, _ := corpusMail(t)
	return mails
}

// DictMailID is the mail dictionary's id in a frame's header.
const DictMailID = dictMailID

// RawDictMax is the largest raw mail framed over the mail dictionary.
const RawDictMax = rawDictMax
