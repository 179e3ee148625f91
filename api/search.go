package api

import (
	"context"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/envelopd/envelopd/store"
)

// Search (the SDK's messages.search, threads.search and inboxes.search)
// on the index the lists' q filter uses (FTS5 on SQLite, tsvector on
// Postgres): every word of q, as a prefix, must occur in the subject or
// the Envelopay note. q's words are all the query there is (FTSQuery):
// no search syntax reaches the index, so no query can make it fail. The
// answers are keyset-paged like the lists and ordered newest first
// rather than by relevance; the body is not indexed (docs/api.md).

// maxSearchQuery bounds q (AgentMail: 2 to 256 characters).
const maxSearchQuery = 256

func searchQuery(r *http.Request, min int) (string, error) {
	q := r.URL.Query().Get("q")
	return q, CheckSearch(q, min)
}

// CheckSearch checks a search query: min to 256 characters holding at
// least one word (a run of letters or digits).
func CheckSearch(q string, min int) error {
	if n := utf8.RuneCountInString(q); n < min || n > maxSearchQuery || len(q) > 4*maxSearchQuery {
		return badField("q", "want %d to %d characters", min, maxSearchQuery)
	}
	if store.FTSQuery(q) == "" {
		return badField("q", "no word to search for (letters or digits)")
	}
	return nil
}

// SearchInboxes lists the inboxes p may see whose address or display
// name has a word starting with each word of q, at most limit.
func (s *Service) SearchInboxes(ctx context.Context, p *Principal, q string, limit int) (ListInboxes, error) {
	if err := CheckSearch(q, 2); err != nil {
		return ListInboxes{}, err
	}
	words := strings.FieldsFunc(strings.ToLower(q), notWordRune)
	out := ListInboxes{Page: Page{Limit: limit}, Inboxes: []Inbox{}}
	lp := ListParams{Limit: 100}
	for {
		l, err := s.ListInboxes(ctx, p, lp)
		if err != nil {
			return ListInboxes{}, err
		}
		for _, b := range l.Inboxes {
			if len(out.Inboxes) < limit && prefixesMatch(words, strings.ToLower(b.InboxID+" "+b.DisplayName)) {
				out.Inboxes = append(out.Inboxes, b)
			}
		}
		if l.NextPageToken == "" || len(out.Inboxes) == limit {
			break
		}
		if lp.Cursor, err = DecodeCursor(l.NextPageToken); err != nil {
			return ListInboxes{}, err
		}
	}
	out.Count = len(out.Inboxes)
	return out, nil
}

func (h *Handler) searchParams(r *http.Request, min int) (ListParams, error) {
	lp, err := h.listParams(r)
	if err != nil {
		return lp, err
	}
	if lp.Limit > 100 {
		return lp, badField("limit", "a search answers at most 100 per page")
	}
	lp.Search, err = searchQuery(r, min)
	return lp, err
}

func (h *Handler) searchMessages(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.searchWords(1), func(lp ListParams) (any, error) {
		return h.svc.ListMessages(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}

func (h *Handler) searchThreads(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.searchWords(1), func(lp ListParams) (any, error) {
		return h.svc.ListThreads(r.Context(), p, r.PathValue("inbox_id"), lp)
	})
}

// searchWords is searchParams with min, as answer reads it.
func (h *Handler) searchWords(min int) func(*http.Request) (ListParams, error) {
	return func(r *http.Request) (ListParams, error) { return h.searchParams(r, min) }
}

// searchInboxes matches word prefixes of the address and display name
// (AgentMail: 2 to 256 characters) over the inboxes p may see.
func (h *Handler) searchInboxes(w http.ResponseWriter, r *http.Request, p *Principal) (any, int, error) {
	return answer(r, h.searchWords(2), func(lp ListParams) (any, error) {
		return h.svc.SearchInboxes(r.Context(), p, lp.Search, lp.Limit)
	})
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// prefixesMatch reports whether every word is a prefix of a word of s.
func prefixesMatch(words []string, s string) bool {
	have := strings.FieldsFunc(s, notWordRune)
	for _, w := range words {
		found := false
		for _, h := range have {
			if strings.HasPrefix(h, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (h *Handler) searchRoutes(a func(string, authed)) {
	a("GET /v0/inboxes/search", h.searchInboxes)
	a("GET /v0/pods/{pod_id}/inboxes/search", h.inPod(h.searchInboxes))
	a("GET /v0/inboxes/{inbox_id}/messages/search", h.searchMessages)
	a("GET /v0/inboxes/{inbox_id}/threads/search", h.searchThreads)
	a("GET /v0/threads/search", h.searchThreads)
	a("GET /v0/pods/{pod_id}/threads/search", h.inPod(h.searchThreads))
}
