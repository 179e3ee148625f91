package store

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Usage (the SDK's metrics.queryUsage): what the organisation and each
// inbox hold over time — messages, their bytes, threads, inboxes —
// read from counters the inbox index keeps per inbox and hour
// (api_usage), never from the messages themselves: a series over years
// of mail reads one row per hour that had mail, whatever the number of
// messages. SyncInboxes adds to the counters in the transaction that
// indexes the messages, so they agree with the index: a message counts
// once per inbox that shows it, when the index takes it, in the hour it
// was received. envelopd keeps every accepted message (a delete hides
// it from the inbox's view), so the counters only grow.

// usageHour is the counters' resolution.
const usageHour = int64(time.Hour)

// usageDDL is migration 30: the webhooks' custom delivery headers and
// the usage counters, filled from the inbox index as it stands (inbox
// "" is the whole organisation: the sum over inboxes).
const usageDDL = `
ALTER TABLE api_webhooks ADD COLUMN headers TEXT NOT NULL DEFAULT '{}';
CREATE TABLE api_usage (
	inbox    TEXT{key} NOT NULL,                  -- '' the organisation
	at_hour  INTEGER NOT NULL,                    -- Unix ns of the hour's start (UTC)
	messages INTEGER NOT NULL DEFAULT 0,
	bytes    INTEGER NOT NULL DEFAULT 0,
	threads  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (inbox, at_hour)
) WITHOUT ROWID;
INSERT INTO api_usage (inbox, at_hour, messages, bytes, threads)
	SELECT inbox, h, sum(n), sum(b), sum(t) FROM (
		SELECT im.inbox AS inbox, m.received_at - m.received_at % 3600000000000 AS h, 1 AS n, m.size AS b, 0 AS t
			FROM inbox_messages im JOIN messages m ON m.id = im.message_id
		UNION ALL
		SELECT im.inbox, min(m.received_at) - min(m.received_at) % 3600000000000, 0, 0, 1
			FROM inbox_messages im JOIN messages m ON m.id = im.message_id GROUP BY im.inbox, im.thread_id
	) x GROUP BY inbox, h;
INSERT INTO api_usage (inbox, at_hour, messages, bytes, threads)
	SELECT '', at_hour, sum(messages), sum(bytes), sum(threads) FROM api_usage GROUP BY at_hour;
`

// UsageStore is the inbox index's usage counters (usage.go).
type UsageStore interface {
	Usage(ctx context.Context, inboxes []string, start, end time.Time, period time.Duration) ([]time.Time, []Usage, error)
}

var _ UsageStore = indexRoom{}

// Usage is what an inbox (or the organisation) held at a time.
type Usage struct {
	Messages int64 // messages stored (one per inbox that shows it)
	Bytes    int64 // their size as received
	Threads  int64 // threads they began
	Inboxes  int64 // inboxes created and not deleted
}

// usageDelta is what one batch of SyncInboxes adds to an inbox's hour.
type usageDelta struct{ messages, bytes, threads int64 }

type usageKey struct {
	inbox string
	hour  int64
}

// usageCount adds a message (and, when it began a thread for the
// inbox, the thread) to d, in the inbox's and the organisation's hour.
func usageCount(d map[usageKey]*usageDelta, inbox string, at, size int64, newThread bool) {
	h := at - at%usageHour
	for _, k := range []usageKey{{inbox, h}, {"", h}} {
		u := d[k]
		if u == nil {
			u = &usageDelta{}
			d[k] = u
		}
		u.messages++
		u.bytes += size
		if newThread {
			u.threads++
		}
	}
}

// putUsage adds d to the counters, in tx (SyncInboxes' transaction).
func putUsage(tx Tx, d map[usageKey]*usageDelta) error {
	keys := make([]usageKey, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	// One order for every writer: two nodes never wait on each other's
	// rows in opposite orders.
	slices.SortFunc(keys, func(a, b usageKey) int {
		if a.inbox != b.inbox {
			if a.inbox < b.inbox {
				return -1
			}
			return 1
		}
		return int(min(max(a.hour-b.hour, -1), 1))
	})
	for _, k := range keys {
		u := d[k]
		if _, err := tx.Exec(`INSERT INTO api_usage (inbox, at_hour, messages, bytes, threads) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (inbox, at_hour) DO UPDATE SET messages = api_usage.messages + excluded.messages,
			bytes = api_usage.bytes + excluded.bytes, threads = api_usage.threads + excluded.threads`,
			k.inbox, k.hour, u.messages, u.bytes, u.threads); err != nil {
			return fmt.Errorf("store: usage: %w", err)
		}
	}
	return nil
}

// MaxUsagePoints bounds the points of one Usage answer.
const MaxUsagePoints = MaxBuckets

// UsagePoints are the times a usage series has values at: the ends of
// the periods from start, start+period, start+2·period, …, the last one
// end. At most MaxUsagePoints, else ErrBadInput.
func UsagePoints(start, end time.Time, period time.Duration) ([]time.Time, error) {
	if period <= 0 || !end.After(start) || (end.Sub(start)+period-1)/period > MaxUsagePoints {
		return nil, fmt.Errorf("%w: usage from %s to %s in periods of %s (at most %d periods)", ErrBadInput,
			start.Format(time.RFC3339), end.Format(time.RFC3339), period, MaxUsagePoints)
	}
	var at []time.Time
	for t := start.Add(period); t.Before(end); t = t.Add(period) {
		at = append(at, t)
	}
	return append(at, end), nil
}

// Usage returns what inboxes (nil: the organisation, every inbox) held
// at each of UsagePoints(start, end, period): the messages, bytes and
// threads of the hours that began before the point — the hour a point
// falls in counts whole — and the inboxes created before it that are
// not deleted. The index is brought up to date first. The counters are
// summed per period by the database, over one row per inbox and hour
// with mail (none of the messages is read), and the inboxes' creation
// times are read once.
func (s indexRoom) Usage(ctx context.Context, inboxes []string, start, end time.Time, period time.Duration) ([]time.Time, []Usage, error) {
	at, err := UsagePoints(start, end, period)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Usage, len(at))
	if inboxes != nil && len(inboxes) == 0 {
		return at, out, nil
	}
	if _, err := s.SyncInboxes(ctx, 0); err != nil {
		return nil, nil, err
	}
	t0, t1 := start.UTC().UnixNano(), end.UTC().UnixNano()
	scope, args := `inbox = ''`, []any{}
	if inboxes != nil {
		scope, args = inList("inbox", inboxes)
	}
	// Per period: the hours before start are period -1 (counted at every
	// point); an hour in period k counts from point k on (its end).
	rows, err := s.r.QueryContext(ctx, `SELECT CASE WHEN at_hour < ? THEN -1 ELSE (at_hour - ?) / ? END AS k,
		sum(messages), sum(bytes), sum(threads) FROM api_usage WHERE `+scope+` AND at_hour < ? GROUP BY k ORDER BY k`,
		append(append([]any{t0, t0, int64(period)}, args...), t1)...)
	delta := make([]Usage, len(at))
	var base Usage
	if err := eachRow(rows, err, "store: usage", func(sc scanner) error {
		var k, m, b, th int64
		if err := sc.Scan(&k, &m, &b, &th); err != nil {
			return err
		}
		d := &base
		if k >= 0 {
			d = &delta[min(k, int64(len(at)-1))]
		}
		d.Messages, d.Bytes, d.Threads = d.Messages+m, d.Bytes+b, d.Threads+th
		return nil
	}); err != nil {
		return nil, nil, err
	}
	run := base
	for i, d := range delta {
		run.Messages, run.Bytes, run.Threads = run.Messages+d.Messages, run.Bytes+d.Bytes, run.Threads+d.Threads
		out[i] = run
	}
	// Inboxes: their creation times, in order.
	q, iargs := `SELECT created_at FROM api_inboxes WHERE deleted = 0 AND created_at < ?`, []any{t1}
	if inboxes != nil {
		c, a := inList("address", inboxes)
		q += " AND " + c
		iargs = append(iargs, a...)
	}
	var created []int64
	rows, err = s.r.QueryContext(ctx, q, iargs...)
	if err := eachRow(rows, err, "store: usage inboxes", func(sc scanner) error {
		var c int64
		err := sc.Scan(&c)
		created = append(created, c)
		return err
	}); err != nil {
		return nil, nil, err
	}
	slices.Sort(created)
	j := 0
	for i, t := range at {
		for ; j < len(created) && created[j] < t.UTC().UnixNano(); j++ {
		}
		out[i].Inboxes = int64(j)
	}
	return at, out, nil
}
