package store

import (
	"context"
	"strings"
)

// ThreadsMessages returns the messages of several threads (each in its
// inbox) in one query, ordered by inbox, thread and message id: a page of
// a thread list costs one statement, not one per thread (a
// statement's preparation dominates a small query).
func (s *core) ThreadsMessages(ctx context.Context, refs []ThreadRef) ([]InboxMessage, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	if len(refs) == 0 {
		return []InboxMessage{}, nil
	}
	vals := make([]string, len(refs))
	args := make([]any, 0, 2*len(refs))
	for i, r := range refs {
		vals[i] = "(?, ?)"
		args = append(args, r.Inbox, r.ThreadID)
	}
	q := `SELECT x.inbox, x.labels, ` + messageCols + ` FROM inbox_messages x` + s.d.inboxThreadIndex + `
		JOIN messages m ON m.id = x.message_id
		WHERE (x.inbox, x.thread_id) IN (VALUES ` + strings.Join(vals, ", ") + `)
		ORDER BY x.inbox, x.thread_id, x.message_id`
	return s.inboxQuery(ctx, q, args...)
}
