package store

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"time"
)

// Bucket is one period of an event count (the SDK's MetricBucket).
type Bucket struct {
	Start time.Time
	Count int64
}

// MaxBuckets bounds the periods one EventCounts answers.
const MaxBuckets = 10000

// EventCounts counts the event log's events of types (nil: every type)
// of inboxes (nil: every inbox) created in [start, end), per type, in
// periods of period from start; only periods with events are returned,
// oldest first. The span is at most MaxBuckets periods.
func (s eventRoom) EventCounts(ctx context.Context, inboxes, types []string, start, end time.Time, period time.Duration) (map[string][]Bucket, error) {
	if period <= 0 || !end.After(start) || end.Sub(start)/period > MaxBuckets {
		return nil, fmt.Errorf("%w: event counts over %s in periods of %s (at most %d periods)", ErrBadInput, end.Sub(start), period, MaxBuckets)
	}
	s.syncEvents(ctx)
	// message.received counts its variants (blocked, unauthenticated)
	// too: every received message.
	q := `SELECT CASE WHEN type IN ('` + EventReceivedBlocked + `', '` + EventReceivedUnauthenticated + `') THEN '` + EventReceived + `' ELSE type END,
		(created_at - ?) / ?, count(*) FROM api_events WHERE created_at >= ? AND created_at < ?`
	p0 := start.UTC().UnixNano()
	args := []any{p0, int64(period), p0, end.UTC().UnixNano()}
	if s.d.eventHours != "" {
		q += " AND " + s.d.eventHours
		args = append(args, p0, end.UTC().UnixNano())
	}
	if inboxes != nil {
		if len(inboxes) == 0 {
			return map[string][]Bucket{}, nil
		}
		c, a := inList("inbox", inboxes)
		q += " AND " + c
		args = append(args, a...)
	}
	if len(types) > 0 {
		if slices.Contains(types, EventReceived) {
			types = append(slices.Clone(types), EventReceivedBlocked, EventReceivedUnauthenticated)
		}
		c, a := inList("type", types)
		q += " AND " + c
		args = append(args, a...)
	}
	q += ` GROUP BY 1, 2`
	out := map[string][]Bucket{}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err := eachRow(rows, err, "store: event counts", func(sc scanner) error {
		var typ string
		var n, c int64
		err := sc.Scan(&typ, &n, &c)
		out[typ] = append(out[typ], Bucket{Start: start.UTC().Add(time.Duration(n) * period), Count: c})
		return err
	}); err != nil {
		return nil, err
	}
	for _, b := range out {
		sort.Slice(b, func(i, j int) bool { return b[i].Start.Before(b[j].Start) })
	}
	return out, nil
}
