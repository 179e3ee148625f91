package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/envelopd/envelopd/api"
	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/protocols/envelopay"
)

// Paging is the list tools' paging, as the API's query parameters.
type Paging struct {
	Limit     int      `json:"limit,omitempty" jsonschema:"page size, 1 to 1000 (default 50)"`
	PageToken string   `json:"page_token,omitempty" jsonschema:"next_page_token of the previous page"`
	Ascending bool     `json:"ascending,omitempty" jsonschema:"oldest first (default newest first)"`
	Labels    []string `json:"labels,omitempty" jsonschema:"labels that must all be present: received, sent, accepted, quarantined, duplicate, or your own"`
}

// params is p as api.ListParams, through the API's own parser (the same
// bounds and errors).
func (p Paging) params() (api.ListParams, error) {
	q := url.Values{}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.PageToken != "" {
		q.Set("page_token", p.PageToken)
	}
	if p.Ascending {
		q.Set("ascending", "true")
	}
	if len(p.Labels) > 0 {
		j, _ := json.Marshal(p.Labels) // the JSON array form: labels are taken as they are
		q.Set("labels", string(j))
	}
	return api.ParseList(q)
}

type listInboxesIn struct {
	Limit     int    `json:"limit,omitempty" jsonschema:"page size, 1 to 1000 (default 50)"`
	PageToken string `json:"page_token,omitempty" jsonschema:"next_page_token of the previous page"`
	PageTok   string `json:"pageToken,omitempty" jsonschema:"page_token, AgentMail's spelling"`
}

type createInboxIn struct {
	Username    string `json:"username,omitempty" jsonschema:"local part (default: random)"`
	Domain      string `json:"domain,omitempty" jsonschema:"domain (default: the server's first domain)"`
	DisplayName string `json:"display_name,omitempty"`
	ClientID    string `json:"client_id,omitempty" jsonschema:"idempotency key: the same client_id returns the first inbox"`
	// AgentMail's spellings.
	DisplayNameAM string `json:"displayName,omitempty" jsonschema:"display_name, AgentMail's spelling"`
	ClientIDAM    string `json:"clientId,omitempty" jsonschema:"client_id, AgentMail's spelling"`
}

type createInboxOut struct {
	Inbox   api.Inbox `json:"inbox"`
	Created bool      `json:"created"`
}

type listThreadsIn struct {
	InboxID string `json:"inbox_id,omitempty" jsonschema:"inbox address (default: every inbox you may see)"`
	amAlias
	Paging
}

// amAlias are AgentMail's camelCase spellings of the first tools'
// arguments (its MCP server's argument shapes).
type amAlias struct {
	InboxIDAM   string `json:"inboxId,omitempty" jsonschema:"inbox_id, AgentMail's spelling"`
	PageTokenAM string `json:"pageToken,omitempty" jsonschema:"page_token, AgentMail's spelling"`
}

// or is a, else b.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type getThreadIn struct {
	InboxID   string `json:"inbox_id,omitempty" jsonschema:"inbox address (default: the first inbox you may see that shows the thread)"`
	ThreadID  string `json:"thread_id,omitempty" jsonschema:"the thread (or threadId)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"messages per page, oldest first (default 50)"`
	PageToken string `json:"page_token,omitempty"`
	amAlias
	ThreadIDAM string `json:"threadId,omitempty" jsonschema:"thread_id, AgentMail's spelling"`
}

type listMessagesIn struct {
	InboxID string `json:"inbox_id,omitempty" jsonschema:"inbox address (or inboxId)"`
	amAlias
	Paging
}

type messageIn struct {
	InboxID     string `json:"inbox_id,omitempty" jsonschema:"inbox address (or inboxId)"`
	MessageID   string `json:"message_id,omitempty" jsonschema:"Message-ID (angle brackets optional) or store row id (or messageId)"`
	InboxIDAM   string `json:"inboxId,omitempty" jsonschema:"inbox_id, AgentMail's spelling"`
	MessageIDAM string `json:"messageId,omitempty" jsonschema:"message_id, AgentMail's spelling"`
}

// check requires both ids in either spelling.
func (in messageIn) check() error {
	if or(in.InboxID, in.InboxIDAM) == "" {
		return invalid("inbox_id", "required (inbox_id or inboxId)")
	}
	if or(in.MessageID, in.MessageIDAM) == "" {
		return invalid("message_id", "required (message_id or messageId)")
	}
	return nil
}

type rawOut struct {
	MessageID string `json:"message_id"`
	Size      int    `json:"size"`
	// Encoding is "text" (raw is the message as is) or "base64" (the
	// message is not UTF-8).
	Encoding string `json:"encoding"`
	Raw      string `json:"raw"`
}

// envelopayIn is an Envelopay message to send: its type, its JSON fields
// and an optional note; v, type and id are filled when absent.
type envelopayIn struct {
	Type string          `json:"type" jsonschema:"Envelopay type: which, methods, pay, order, fulfill, invoice, offer, accept or oops"`
	Body json.RawMessage `json:"body,omitempty" jsonschema:"the message's JSON object (fields of the type, e.g. {\"task\":{...}} for an order, order_ref, amount, token, chain, proof, rails ...); v, type and id are filled when absent. Omit for a bare WHICH"`
	Note string          `json:"note,omitempty" jsonschema:"short note, shown in the subject TYPE | note"`
	Text string          `json:"text,omitempty" jsonschema:"human-readable text put before the JSON"`
}

type sendIn struct {
	InboxID string   `json:"inbox_id" jsonschema:"the sending inbox (its address)"`
	To      []string `json:"to" jsonschema:"recipient addresses"`
	Cc      []string `json:"cc,omitempty"`
	envelopayIn
	Subject   string   `json:"subject,omitempty" jsonschema:"default: TYPE or TYPE | note"`
	InReplyTo string   `json:"in_reply_to,omitempty" jsonschema:"Message-ID this answers (threads it); prefer the reply tool"`
	Labels    []string `json:"labels,omitempty" jsonschema:"your labels for the sent copy"`
	Force     bool     `json:"force,omitempty" jsonschema:"send even though envelopd finds Envelopay errors (the receiver will quarantine it)"`
}

type replyIn struct {
	InboxID   string `json:"inbox_id" jsonschema:"your inbox"`
	MessageID string `json:"message_id,omitempty" jsonschema:"the message answered (or give thread_id: its last message is answered)"`
	ThreadID  string `json:"thread_id,omitempty"`
	// Type empty: a plain-text reply of Text.
	Type     string          `json:"type,omitempty" jsonschema:"Envelopay type of the reply; empty for a plain-text reply"`
	Body     json.RawMessage `json:"body,omitempty" jsonschema:"the reply's Envelopay JSON object (v, type, id filled when absent)"`
	Note     string          `json:"note,omitempty"`
	Text     string          `json:"text,omitempty" jsonschema:"human-readable text (before the JSON), or the whole plain-text reply"`
	Subject  string          `json:"subject,omitempty" jsonschema:"default: TYPE | note, or Re: the original's"`
	ReplyAll bool            `json:"reply_all,omitempty"`
	Labels   []string        `json:"labels,omitempty"`
	Force    bool            `json:"force,omitempty"`
}

type waitIn struct {
	InboxID        string   `json:"inbox_id" jsonschema:"the inbox to watch"`
	Type           string   `json:"type,omitempty" jsonschema:"Envelopay type to wait for (any when empty)"`
	From           string   `json:"from,omitempty" jsonschema:"sender address"`
	ThreadID       string   `json:"thread_id,omitempty"`
	Labels         []string `json:"labels,omitempty" jsonschema:"labels that must all be present (default [received])"`
	AfterMessageID string   `json:"after_message_id,omitempty" jsonschema:"only messages stored after this one of the inbox (e.g. the message_id you sent from it); default: messages stored after the call"`
	Cursor         *int64   `json:"cursor,omitempty" jsonschema:"instead of after_message_id: a previous result's cursor (0: from the inbox's first message)"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"how long to wait, 1 to 300 (default 30)"`
}

type labelIn struct {
	InboxID      string   `json:"inbox_id"`
	MessageID    string   `json:"message_id"`
	AddLabels    []string `json:"add_labels,omitempty"`
	RemoveLabels []string `json:"remove_labels,omitempty"`
}

// Wait bounds (a bounded timeout).
const (
	DefaultWait = 30 * time.Second
	MaxWait     = 5 * time.Minute
)

func (s *server) register(srv *sdk.Server) {
	tool(s, srv, "list_inboxes", "List the inboxes (email addresses) you may use, by address.",
		func(ctx context.Context, p *api.Principal, in listInboxesIn) (api.ListInboxes, error) {
			lp, err := Paging{Limit: in.Limit, PageToken: or(in.PageToken, in.PageTok)}.params()
			if err != nil {
				return api.ListInboxes{}, err
			}
			return s.cfg.Service.ListInboxes(ctx, p, lp)
		})
	tool(s, srv, "create_inbox", "Create an inbox (an address at one of the server's domains). Idempotent per client_id.",
		func(ctx context.Context, p *api.Principal, in createInboxIn) (createInboxOut, error) {
			b, created, err := s.cfg.Service.CreateInbox(ctx, p, api.CreateInboxRequest{Username: in.Username,
				Domain: in.Domain, DisplayName: or(in.DisplayName, in.DisplayNameAM), ClientID: or(in.ClientID, in.ClientIDAM)})
			return createInboxOut{Inbox: b, Created: created}, err
		})
	tool(s, srv, "list_threads", "List threads (newest activity first) of an inbox, or of every inbox you may see.",
		func(ctx context.Context, p *api.Principal, in listThreadsIn) (api.ListThreads, error) {
			in.PageToken = or(in.PageToken, in.PageTokenAM)
			lp, err := in.Paging.params()
			if err != nil {
				return api.ListThreads{}, err
			}
			return s.cfg.Service.ListThreads(ctx, p, or(in.InboxID, in.InboxIDAM), lp)
		})
	tool(s, srv, "get_thread", "Get a thread with its messages, oldest first, each with its envelopay verdicts.",
		func(ctx context.Context, p *api.Principal, in getThreadIn) (api.Thread, error) {
			lp, err := Paging{Limit: in.Limit, PageToken: or(in.PageToken, in.PageTokenAM)}.params()
			if err != nil {
				return api.Thread{}, err
			}
			if or(in.ThreadID, in.ThreadIDAM) == "" {
				return api.Thread{}, invalid("thread_id", "required (thread_id or threadId)")
			}
			return s.cfg.Service.GetThread(ctx, p, or(in.InboxID, in.InboxIDAM), or(in.ThreadID, in.ThreadIDAM), lp)
		})
	tool(s, srv, "list_messages", "List an inbox's messages (newest first), each with its envelopay verdicts.",
		func(ctx context.Context, p *api.Principal, in listMessagesIn) (api.ListMessages, error) {
			in.PageToken = or(in.PageToken, in.PageTokenAM)
			lp, err := in.Paging.params()
			if err != nil {
				return api.ListMessages{}, err
			}
			return s.cfg.Service.ListMessages(ctx, p, or(in.InboxID, in.InboxIDAM), lp)
		})
	tool(s, srv, "get_message", "Get one message: text, headers, attachments and its envelopay verdicts (type, body, status, error codes, DKIM per signature, tunnelled-protocol verdicts).",
		func(ctx context.Context, p *api.Principal, in messageIn) (api.Message, error) {
			if err := in.check(); err != nil {
				return api.Message{}, err
			}
			return s.cfg.Service.GetMessage(ctx, p, or(in.InboxID, in.InboxIDAM), or(in.MessageID, in.MessageIDAM))
		})
	tool(s, srv, "get_raw", "Get the exact stored bytes of a message (RFC 5322 source, DKIM signatures included).",
		func(ctx context.Context, p *api.Principal, in messageIn) (rawOut, error) {
			if err := in.check(); err != nil {
				return rawOut{}, err
			}
			m, r, err := s.cfg.Service.GetRaw(ctx, p, or(in.InboxID, in.InboxIDAM), or(in.MessageID, in.MessageIDAM))
			if err != nil {
				return rawOut{}, err
			}
			out := rawOut{MessageID: r.MessageID, Size: r.Size, Encoding: "text", Raw: string(m.Raw)}
			if !utf8.Valid(m.Raw) {
				out.Encoding, out.Raw = "base64", base64.StdEncoding.EncodeToString(m.Raw)
			}
			return out, nil
		})
	tool(s, srv, "send_envelopay", "Send a new Envelopay message of any of the nine types. It is validated before anything is sent (fields, typed refs that must exist, duplicate ids and proofs, OFFER/ACCEPT amounts): an invalid one is not sent and the error names the codes.",
		func(ctx context.Context, p *api.Principal, in sendIn) (api.SendResult, error) {
			sr, err := envelopayRequest(in.envelopayIn, in.Subject)
			if err != nil {
				return api.SendResult{}, err
			}
			sr.To, sr.Cc, sr.Labels, sr.Force = in.To, in.Cc, in.Labels, in.Force
			if in.InReplyTo != "" {
				sr.Headers = map[string]string{"In-Reply-To": in.InReplyTo, "References": in.InReplyTo}
			}
			return s.cfg.Service.Send(ctx, p, in.InboxID, sr)
		})
	tool(s, srv, "reply", "Reply in a thread: to a message (message_id) or to a thread's last message (thread_id), with an Envelopay message (type, body) or plain text. Validated like send_envelopay.",
		func(ctx context.Context, p *api.Principal, in replyIn) (api.SendResult, error) {
			if (in.MessageID == "") == (in.ThreadID == "") {
				return api.SendResult{}, invalid("message_id", "give message_id or thread_id (one of them)")
			}
			var sr api.SendRequest
			if in.Type != "" || len(in.Body) > 0 {
				var err error
				if sr, err = envelopayRequest(envelopayIn{Type: in.Type, Body: in.Body, Note: in.Note, Text: in.Text}, in.Subject); err != nil {
					return api.SendResult{}, err
				}
			} else {
				sr.Text = in.Text
				if in.Subject != "" {
					sr.Subject = &in.Subject
				}
			}
			sr.ReplyAll, sr.Labels, sr.Force = in.ReplyAll, in.Labels, in.Force
			if in.ThreadID != "" {
				return s.cfg.Service.ReplyThread(ctx, p, in.InboxID, in.ThreadID, sr)
			}
			return s.cfg.Service.Reply(ctx, p, in.InboxID, in.MessageID, sr, in.ReplyAll)
		})
	tool(s, srv, "wait_for_message", "Wait for the next message of an inbox matching a filter (type, sender, thread, labels), up to timeout_seconds (default 30, at most 300). Returns the message, or timed_out with a cursor to wait again from.",
		func(ctx context.Context, p *api.Principal, in waitIn) (api.WaitResult, error) {
			d := DefaultWait
			if in.TimeoutSeconds != 0 {
				if in.TimeoutSeconds < 1 || in.TimeoutSeconds > int(MaxWait/time.Second) {
					return api.WaitResult{}, invalid("timeout_seconds", "want 1 to 300")
				}
				d = time.Duration(in.TimeoutSeconds) * time.Second
			}
			if in.Type != "" && !envelopay.IsType(strings.ToLower(in.Type)) {
				return api.WaitResult{}, invalid("type", "unknown Envelopay type (one of "+strings.Join(envelopay.Types, ", ")+")")
			}
			labels := in.Labels
			if labels == nil {
				labels = []string{"received"}
			}
			return s.cfg.Service.WaitMessage(ctx, p, api.WaitFilter{Inbox: in.InboxID, Type: in.Type, From: in.From,
				ThreadID: in.ThreadID, Labels: labels, After: in.AfterMessageID, AfterID: in.Cursor}, d)
		})
	tool(s, srv, "label_message", "Add or remove your own labels on a message (received, sent, accepted, quarantined and duplicate are envelopd's and cannot be changed).",
		func(ctx context.Context, p *api.Principal, in labelIn) (api.UpdateMessageResult, error) {
			return s.cfg.Service.UpdateMessage(ctx, p, in.InboxID, in.MessageID, api.UpdateLabels{AddLabels: in.AddLabels, RemoveLabels: in.RemoveLabels})
		})
	s.registerSign(srv)
	s.registerAgentMail(srv)
}

// envelopayRequest is the SendRequest of an Envelopay message: its body
// filled and checked by mailout.PrepareBody (the composer's own rules),
// the JSON after the optional text. The stateful checks are the service's
// (store.Check, before anything is queued).
func envelopayRequest(in envelopayIn, subject string) (api.SendRequest, error) {
	bare := len(in.Body) == 0 && strings.EqualFold(in.Type, "which")
	typ, body, err := mailout.PrepareBody(mailout.Draft{Type: in.Type, Note: in.Note, Body: in.Body, NoJSON: bare, Text: in.Text})
	if err != nil {
		return api.SendRequest{}, err
	}
	var sr api.SendRequest
	switch {
	case bare:
		sr.Text = in.Text
		if subject == "" {
			subject = strings.ToUpper(typ)
			if n := strings.Join(strings.Fields(in.Note), " "); n != "" {
				subject += " | " + n
			}
		}
	default:
		sr.Text = mailout.TextBody(in.Text, body)
	}
	if subject != "" {
		sr.Subject = &subject
	}
	return sr, nil
}
