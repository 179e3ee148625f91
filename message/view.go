package message

import (
	"encoding/json"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/senderauth"
	"github.com/envelopd/envelopd/store"
)

// View is the JSON an agent receives for a stored message (hand-off, watch,
// inbox --json, thread): the `envelopd parse` object with the store's final
// word on it — errors and warnings including the stateful ones, valid,
// the courtesy OOPS sent (oops) and its decision (oops_decision), the
// payment its proof makes and how far it is verified (payment), plus id,
// received_at, status, thread_id, mailbox, direction and dkim, and the
// sender verdict (senderauth.Verdict): spf (the RFC 7208 result word),
// spf_detail, dmarc, arc, authenticated_as and authenticated_by — null
// when the message was stored without sender checks.
func View(m *store.Message) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(m.Result) > 0 {
		if err := json.Unmarshal(m.Result, &obj); err != nil {
			obj = map[string]json.RawMessage{}
		}
	}
	set := func(k string, v any) {
		b, err := json.Marshal(v)
		if err == nil {
			obj[k] = b
		}
	}
	errs, warns := m.Errors, m.Warnings
	if errs == nil {
		errs = protocols.Problems{}
	}
	if warns == nil {
		warns = protocols.Problems{}
	}
	set("id", m.ID)
	set("received_at", m.ReceivedAt.UTC().Format(time.RFC3339Nano))
	set("status", m.Status)
	set("thread_id", m.ThreadID)
	set("mailbox", m.Mailbox)
	set("direction", m.Direction)
	set("errors", errs)
	set("warnings", warns)
	set("valid", len(errs) == 0)
	// One truth: oops is the body of the courtesy OOPS actually
	// queued for this message, or null when none was sent — never the
	// parser's preview; oops_decision says what was decided and why.
	obj["oops"] = json.RawMessage("null")
	if m.OOPS != nil && m.OOPS.Sent && len(m.OOPS.Body) > 0 {
		obj["oops"] = m.OOPS.Body
	}
	set("oops_decision", m.OOPS)
	// The payment its proof makes (docs/json.md), null when it has none.
	set("payment", m.Payment)
	if len(m.DKIM) > 0 {
		obj["dkim"] = m.DKIM
	} else {
		set("dkim", []any{})
	}
	delete(obj, senderauth.ResultKey)
	null := json.RawMessage("null")
	obj["spf"], obj["spf_detail"], obj["dmarc"], obj["arc"], obj["authenticated_as"], obj["authenticated_by"] = null, null, null, null, null, null
	if v := senderauth.FromResult(m.Result); v != nil {
		set("spf", v.SPF.Result)
		set("spf_detail", v.SPF)
		set("dmarc", v.DMARC)
		set("arc", v.ARC)
		if v.AuthenticatedAs != "" {
			set("authenticated_as", v.AuthenticatedAs)
			set("authenticated_by", v.AuthenticatedBy)
		}
	}
	return json.Marshal(obj)
}
