package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/internal/pgtest"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// The rows a build at schema 31 wrote: errors and warnings as JSON text
// (and, on Postgres, codes computed from them), a result that holds
// other lists than the columns.
const oldProblemRows = `INSERT INTO messages (id, mailbox, direction, message_id, content_hash, sender,
	recipients, subject, type, envelopay_id, status, thread_id, received_at, errors, warnings, auth_results, size, result)
	VALUES (1024, '', 'in', 'old1@x.test', '\x01', 'a@x.test', '["in@x.test"]', 'old one', '', '', 'quarantined', 't_old1', 1,
		'[{"code":"not_envelopay","field":"subject","message":"not a type"}]', '[{"code":"late","message":"old date"}]', '', 1,
		'{"type":null,"note":"","errors":[],"warnings":[]}'),
	(2048, '', 'in', 'old2@x.test', '\x02', 'a@x.test', '["in@x.test"]', 'old two', '', '', 'accepted', 't_old2', 2,
		'[]', '[]', '', 1, NULL)`

// TestMigrateProblemsOnce: from schema 33 a message's errors and warnings
// are kept once — the column ” when its list is the stored result's —
// and the codes in a column of their own (SQLite). Rows stored before
// read as they were and their filters find them; a new message whose
// lists are its result's stores ” and reads them back from the result,
// one whose lists differ (an error added at ingest: the update path)
// keeps them; every code filter finds exactly its messages.
func TestMigrateProblemsOnce(t *testing.T) {
	t.Parallel()
	path := oldDatabase(t, 31, sqliteOld(oldProblemRows))
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testProblemsOnce(t, func(ctx context.Context) (store.DB, error) { return store.OpenSQLite(ctx, path) }, db)
}

// TestPostgresMigrateProblemsOnce is TestMigrateProblemsOnce on Postgres
// (migration 33: codes no longer generated, written by the store).
func TestPostgresMigrateProblemsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.Schema(t)
	db, err := store.PGMigrateTo(ctx, dsn, 31)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, oldProblemRows); err != nil {
		t.Fatal(err)
	}
	testProblemsOnce(t, func(ctx context.Context) (store.DB, error) { return store.OpenPostgres(ctx, dsn) }, db)
}

// sqliteOld spells oldProblemRows' blobs as SQLite does.
func sqliteOld(q string) string {
	return strings.NewReplacer(`'\x01'`, `x'01'`, `'\x02'`, `x'02'`).Replace(q)
}

func testProblemsOnce(t *testing.T, open func(context.Context) (store.DB, error), raw *sql.DB) {
	ctx := context.Background()
	s, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The result's lists as parse.Result writes them: no HTML escaping.
	notEnv := protocols.Problems{{Code: "not_envelopay", Field: "subject", Message: `subject "a <b> & c" is not a type`}}
	late := protocols.Problems{{Code: "late", Message: "old date"}}
	result := `{"type":null,"note":"","errors":[{"code":"not_envelopay","field":"subject","message":"subject \"a <b> & c\" is not a type"}],"warnings":[{"code":"late","message":"old date"}],"body":{"errors":[]}}`
	in := func(mid, eid string, errs, warns protocols.Problems, result string) *store.Incoming {
		status := store.StatusAccepted
		if len(errs) > 0 {
			status = store.StatusQuarantined
		}
		typ := ""
		if eid != "" {
			typ = "pay"
		}
		return &store.Incoming{Direction: store.DirIn, MessageID: mid, Sender: "b@x.test", Recipients: []string{"in@x.test"},
			Raw: []byte("raw of " + mid), Subject: mid, Type: typ, EnvelopayID: eid, Status: status,
			Errors: errs, Warnings: warns, Result: json.RawMessage(result), ReceivedAt: time.Now()}
	}
	news := []*store.Incoming{
		in("same@x.test", "", notEnv, late, result),                                      // the result's lists: kept once
		in("other@x.test", "", late, nil, result),                                        // other lists than the result's
		in("pay1@x.test", "pay_9", nil, nil, `{"type":"pay","errors":[],"warnings":[]}`), // accepted
		in("pay2@x.test", "pay_9", nil, nil, `{"type":"pay","errors":[],"warnings":[]}`), // duplicate_id, added at ingest
		in("none@x.test", "", nil, nil, ""),                                              // no result
	}
	ids := map[string]int64{"old1": 1024, "old2": 2048}
	for _, n := range news {
		out, err := s.Ingest(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		ids[n.MessageID] = out.ID
	}
	want := map[string][2]string{
		"old1":         {`[{"code":"not_envelopay","field":"subject","message":"not a type"}]`, `[{"code":"late","message":"old date"}]`},
		"old2":         {`[]`, `[]`},
		"same@x.test":  {mustJSON(notEnv), mustJSON(late)},
		"other@x.test": {mustJSON(late), `[]`},
		"pay1@x.test":  {`[]`, `[]`},
		"none@x.test":  {`[]`, `[]`},
	}
	for name, w := range want {
		m, err := s.Message(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]string{mustJSON(m.Errors), mustJSON(m.Warnings)}; got != w {
			t.Errorf("%s: errors and warnings %s, want %s", name, got, w)
		}
	}
	dup, err := s.Message(ctx, ids["pay2@x.test"])
	if err != nil {
		t.Fatal(err)
	}
	if dup.Status != store.StatusDuplicate || len(dup.Errors) != 1 || dup.Errors[0].Code != "duplicate_id" {
		t.Errorf("pay2: %s %s, want duplicate with duplicate_id", dup.Status, mustJSON(dup.Errors))
	}
	// What is stored: '' where the list is the result's, the list
	// elsewhere.
	for name, w := range map[string][2]string{
		"same@x.test": {"", ""}, "other@x.test": {mustJSON(late), `[]`}, "pay1@x.test": {`[]`, ""},
		"pay2@x.test": {mustJSON(dup.Errors), ""}, "none@x.test": {`[]`, `[]`},
	} {
		var got [2]string
		if err := raw.QueryRowContext(ctx, `SELECT errors, warnings FROM messages WHERE id = `+fmt.Sprint(ids[name])).
			Scan(&got[0], &got[1]); err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s: stored errors and warnings %q, want %q", name, got, w)
		}
	}
	waitIndexed(t, s, len(news)+2, "in@x.test")
	for _, tc := range []struct {
		code string
		want []int64
	}{
		{"not_envelopay", []int64{ids["same@x.test"], 1024}},
		{"late", []int64{ids["other@x.test"], ids["same@x.test"], 1024}},
		{"duplicate_id", []int64{ids["pay2@x.test"]}},
		{"none", nil},
	} {
		if got := inboxIDs(t, s, store.InboxQuery{Inbox: "in@x.test", ErrorCode: tc.code}); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("code:%s: %v, want %v", tc.code, got, tc.want)
		}
	}
	// An exact redelivery answers the stored lists.
	out, err := s.Ingest(ctx, news[0])
	if err != nil || !out.Redelivery || mustJSON(out.Errors) != mustJSON(notEnv) || mustJSON(out.Warnings) != mustJSON(late) {
		t.Errorf("redelivery: %+v %v", out, err)
	}
}

// inboxIDs lists the ids of the messages InboxMessages answers for q.
func inboxIDs(t *testing.T, s store.DB, q store.InboxQuery) []int64 {
	t.Helper()
	ms, err := s.InboxMessages(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// mustJSON is v's JSON as the store writes lists: no HTML escaping.
func mustJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
