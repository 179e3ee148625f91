package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	_ "github.com/emersion/go-message/charset" // decode non-UTF-8 text parts
	"github.com/emersion/go-message/mail"

	"github.com/envelopd/envelopd/mailout"
	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/parse"
	"github.com/envelopd/envelopd/store"
)

// The JSON objects of the API, with the snake_case wire names the SDK's
// serialization layer reads (agentmail@0.5.27 serialization/resources).

// Inbox is an AgentMail Inbox.
type Inbox struct {
	PodID       string    `json:"pod_id"`
	InboxID     string    `json:"inbox_id"`
	Email       string    `json:"email"`
	DisplayName string    `json:"display_name,omitempty"`
	ClientID    string    `json:"client_id,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
	CreatedAt   time.Time `json:"created_at"`
}

// podID is the one pod a self-hosted server has.
const podID = "envelopd"

func inboxObject(b store.Inbox) Inbox {
	return Inbox{PodID: podID, InboxID: b.Address, Email: b.Address, DisplayName: b.DisplayName,
		ClientID: b.ClientID, UpdatedAt: b.UpdatedAt, CreatedAt: b.CreatedAt}
}

// Attachment is an AgentMail Attachment (AttachmentResponse with the
// download fields).
type Attachment struct {
	AttachmentID       string     `json:"attachment_id"`
	Filename           string     `json:"filename,omitempty"`
	Size               int        `json:"size"`
	ContentType        string     `json:"content_type,omitempty"`
	ContentDisposition string     `json:"content_disposition,omitempty"`
	ContentID          string     `json:"content_id,omitempty"`
	DownloadURL        string     `json:"download_url,omitempty"`
	ExpiresAt          *time.Time `json:"expires_at,omitempty"`
}

// Message is an AgentMail Message (MessageItem in lists: no text, html,
// reply_to), plus the envelopay extension: the `envelopd inbox --json`
// object of the message (message.View).
type Message struct {
	InboxID       string            `json:"inbox_id"`
	ThreadID      string            `json:"thread_id"`
	MessageID     string            `json:"message_id"`
	Labels        []string          `json:"labels"`
	Timestamp     time.Time         `json:"timestamp"`
	From          string            `json:"from"`
	ReplyTo       []string          `json:"reply_to,omitempty"`
	To            []string          `json:"to"`
	Cc            []string          `json:"cc,omitempty"`
	Subject       string            `json:"subject,omitempty"`
	Preview       string            `json:"preview,omitempty"`
	Text          *string           `json:"text,omitempty"`
	HTML          *string           `json:"html,omitempty"`
	ExtractedText *string           `json:"extracted_text,omitempty"`
	Attachments   []Attachment      `json:"attachments,omitempty"`
	InReplyTo     string            `json:"in_reply_to,omitempty"`
	References    []string          `json:"references,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Size          int               `json:"size"`
	UpdatedAt     time.Time         `json:"updated_at"`
	CreatedAt     time.Time         `json:"created_at"`
	Envelopay     json.RawMessage   `json:"envelopay"`
}

// Thread is an AgentMail Thread (ThreadItem in lists: no count, limit,
// next_page_token, messages).
type Thread struct {
	InboxID           string       `json:"inbox_id"`
	ThreadID          string       `json:"thread_id"`
	Labels            []string     `json:"labels"`
	Timestamp         time.Time    `json:"timestamp"`
	ReceivedTimestamp *time.Time   `json:"received_timestamp,omitempty"`
	SentTimestamp     *time.Time   `json:"sent_timestamp,omitempty"`
	Senders           []string     `json:"senders"`
	Recipients        []string     `json:"recipients"`
	Subject           string       `json:"subject,omitempty"`
	Preview           string       `json:"preview,omitempty"`
	Attachments       []Attachment `json:"attachments,omitempty"`
	LastMessageID     string       `json:"last_message_id"`
	MessageCount      int          `json:"message_count"`
	Size              int          `json:"size"`
	UpdatedAt         time.Time    `json:"updated_at"`
	CreatedAt         time.Time    `json:"created_at"`

	Count         *int      `json:"count,omitempty"`
	Limit         *int      `json:"limit,omitempty"`
	NextPageToken string    `json:"next_page_token,omitempty"`
	Messages      []Message `json:"messages,omitempty"`
}

// wireMessageID is the Message-ID as AgentMail shows it, in angle
// brackets; a message without one is named by its row id.
func wireMessageID(m *store.Message) string {
	if m.MessageID == "" {
		return fmt.Sprint(m.ID)
	}
	return "<" + m.MessageID + ">"
}

// labelsOf are AgentMail's direction labels, envelopd's verdict (the
// status: accepted, quarantined, duplicate), "envelopay" and the
// Envelopay type for Envelopay mail, then the user labels.
func labelsOf(im *store.InboxMessage) []string {
	ls := []string{"received"}
	if im.Direction == store.DirOut {
		ls[0] = "sent"
	}
	ls = append(ls, im.Status)
	for _, l := range im.Labels {
		if !slices.Contains(ls, l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// content is what a full message object reads from the raw bytes.
type content struct {
	text, html  string
	hasText     bool
	hasHTML     bool
	headers     map[string]string
	replyTo     []string
	attachments []partData
}

type partData struct {
	filename, ctype, disposition, cid string
	data                              []byte
}

// Bounds on reading a stored message for its object.
const (
	maxParts = 200
)

// readContent parses raw (a stored message, already bounded in size) for
// the text, html, headers and attachments of its object. A part that
// cannot be read is skipped: stored mail may be malformed, and the object
// is still shown (the envelopay extension carries the parse errors).
func readContent(raw []byte) content {
	var c content
	c.headers = map[string]string{}
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if mr == nil {
		return c
	}
	_ = err
	fields := mr.Header.Fields()
	for fields.Next() {
		k := fields.Key()
		if _, ok := c.headers[k]; ok {
			continue
		}
		v, err := fields.Text()
		if err != nil {
			v = fields.Value()
		}
		c.headers[k] = v
	}
	if l, err := mr.Header.AddressList("Reply-To"); err == nil {
		for _, a := range l {
			c.replyTo = append(c.replyTo, strings.ToLower(a.Address))
		}
	}
	for i := 0; i < maxParts; i++ {
		p, err := mr.NextPart()
		if err == io.EOF || p == nil {
			break
		}
		if err != nil && p == nil {
			break
		}
		data, rerr := io.ReadAll(io.LimitReader(p.Body, int64(len(raw))+1))
		if rerr != nil {
			continue
		}
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := h.ContentType()
			switch {
			case ct == "text/plain" && !c.hasText:
				c.text, c.hasText = validUTF8(data), true
				continue
			case ct == "text/html" && !c.hasHTML:
				c.html, c.hasHTML = validUTF8(data), true
				continue
			case strings.HasPrefix(ct, "multipart/"):
				continue
			}
			c.attachments = append(c.attachments, partData{ctype: ct, disposition: "inline", cid: strings.Trim(h.Get("Content-Id"), "<>"), data: data})
		case *mail.AttachmentHeader:
			ct, _, _ := h.ContentType()
			name, _ := h.Filename()
			c.attachments = append(c.attachments, partData{filename: name, ctype: ct, disposition: "attachment", cid: strings.Trim(h.Get("Content-Id"), "<>"), data: data})
		}
	}
	return c
}

func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func preview(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) > 200 {
		r := []rune(text)
		text = string(r[:200])
	}
	return text
}

// attachmentID names part n of stored message row.
func attachmentID(row int64, n int) string { return fmt.Sprintf("att_%d_%d", row, n) }

// parseAttachmentID reads an attachment id made by attachmentID.
func parseAttachmentID(s string) (row int64, n int, ok bool) {
	if _, err := fmt.Sscanf(s, "att_%d_%d", &row, &n); err != nil || attachmentID(row, n) != s || row <= 0 || n < 0 {
		return 0, 0, false
	}
	return row, n, true
}

// messageObject builds the object of im; full reads the raw bytes (get)
// for text, html, headers and attachment details, else the stored parse
// result gives the list item's fields.
func messageObject(im *store.InboxMessage, full bool) (Message, error) {
	return buildMessage(im, full, true)
}

// buildMessage is messageObject; without view it leaves Envelopay out
// (thread summaries do not show it, and it is the costly part).
func buildMessage(im *store.InboxMessage, full, view bool) (Message, error) {
	m := &im.Message
	var v json.RawMessage
	if view {
		var err error
		if v, err = message.View(m); err != nil {
			return Message{}, err
		}
	}
	r, err := mailout.ResultOf(m)
	if err != nil {
		r = &parse.Result{From: []string{m.Sender}, To: m.Recipients}
	}
	o := Message{
		InboxID: im.Inbox, ThreadID: m.ThreadID, MessageID: wireMessageID(m), Labels: labelsOf(im),
		Timestamp: m.ReceivedAt, Subject: decodeSubject(m.Subject), Size: m.Size,
		UpdatedAt: m.ReceivedAt, CreatedAt: m.ReceivedAt, Envelopay: v,
		To: nonNil(r.To), Cc: r.Cc,
	}
	if len(r.From) > 0 {
		o.From = r.From[0]
	} else {
		o.From = m.Sender
	}
	if len(r.InReplyTo) > 0 {
		o.InReplyTo = "<" + strings.Trim(r.InReplyTo[0], "<>") + ">"
	}
	for _, ref := range r.References {
		o.References = append(o.References, "<"+strings.Trim(ref, "<>")+">")
	}
	if !full {
		for i, a := range r.Attachments {
			o.Attachments = append(o.Attachments, Attachment{AttachmentID: attachmentID(m.ID, i), Filename: a.Filename,
				Size: a.Size, ContentType: a.ContentType, ContentDisposition: "attachment"})
		}
		return o, nil
	}
	c := readContent(m.Raw)
	if c.hasText {
		o.Text, o.ExtractedText = &c.text, &c.text
		o.Preview = preview(c.text)
	}
	if c.hasHTML {
		o.HTML = &c.html
	}
	o.Headers = c.headers
	o.ReplyTo = c.replyTo
	for i, a := range c.attachments {
		o.Attachments = append(o.Attachments, Attachment{AttachmentID: attachmentID(m.ID, i), Filename: a.filename,
			Size: len(a.data), ContentType: a.ctype, ContentDisposition: a.disposition, ContentID: a.cid})
	}
	return o, nil
}

func decodeSubject(s string) string {
	if d, err := new(mime.WordDecoder).DecodeHeader(s); err == nil {
		return d
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// threadObject summarises the messages of one thread in one inbox (oldest
// first).
func threadObject(inbox, thread string, ms []store.InboxMessage) Thread {
	t := Thread{InboxID: inbox, ThreadID: thread, Labels: []string{}, Senders: []string{}, Recipients: []string{}}
	for i := range ms {
		im := &ms[i]
		o, err := buildMessage(im, false, false)
		if err != nil {
			continue
		}
		for _, l := range o.Labels {
			if !slices.Contains(t.Labels, l) {
				t.Labels = append(t.Labels, l)
			}
		}
		if !slices.Contains(t.Senders, o.From) {
			t.Senders = append(t.Senders, o.From)
		}
		for _, r := range append(slices.Clone(o.To), o.Cc...) {
			if !slices.Contains(t.Recipients, r) {
				t.Recipients = append(t.Recipients, r)
			}
		}
		at := im.ReceivedAt
		if im.Direction == store.DirOut {
			t.SentTimestamp = &at
		} else {
			t.ReceivedTimestamp = &at
		}
		if i == 0 {
			t.Subject, t.CreatedAt = o.Subject, at
		}
		t.Timestamp, t.UpdatedAt = at, at
		t.LastMessageID = o.MessageID
		t.Size += im.Size
		t.Attachments = append(t.Attachments, o.Attachments...)
	}
	t.MessageCount = len(ms)
	return t
}
