package storetest

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envelopd/envelopd/payments/proof"
	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// Scenario files: testdata/*.json, one case per file; a new case is a new
// file. Each holds steps ingested in order into a fresh store, each with
// the outcome it must get, and checks run at the end.
//
//go:embed testdata/*.json
var scenarioFS embed.FS

// base is the suite's fixed clock: the receive time of a scenario's step
// 0 (a step's at is seconds after it) and the time the other tests count
// from.
var base = time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)

type scenario struct {
	Doc   string `json:"doc"`
	Steps []step `json:"steps"`
	// Threads: label → number of messages Thread(label's thread) returns
	// (including stored OOPS copies).
	ThreadSizes map[string]int `json:"thread_sizes"`
	// Handoff: target → names of the steps whose message must be (exactly
	// the set) pending in the delivery log for that target.
	Handoff map[string][]string `json:"handoff"`
	// ChainTips: chain → [seq, hash].
	ChainTips map[string][2]any `json:"chain_tips"`
	// QueuedOOPS: number of queue entries of kind "oops".
	QueuedOOPS int `json:"queued_oops"`
}

type step struct {
	Name string `json:"name"`
	In   input  `json:"in"`
	Want want   `json:"want"`
}

type input struct {
	Mailbox     string            `json:"mailbox"`
	Direction   string            `json:"direction"`
	Raw         string            `json:"raw"` // default: built from the fields
	MessageID   string            `json:"message_id"`
	InReplyTo   []string          `json:"in_reply_to"`
	References  []string          `json:"references"`
	Sender      string            `json:"sender"`
	Recipients  []string          `json:"recipients"`
	Subject     string            `json:"subject"`
	At          int64             `json:"at"` // seconds after base
	Type        string            `json:"type"`
	EnvelopayID string            `json:"envelopay_id"`
	Refs        map[string]string `json:"refs"`
	Proof       string            `json:"proof"`
	// Chain and ProofJSON: a proof as the mail carries it, identified by
	// package payments/proof (Proof is then its fingerprint), with a
	// payment row checked by a rail when Rail is set.
	Chain      string                 `json:"chain"`
	ProofJSON  json.RawMessage        `json:"proof_json"`
	Rail       bool                   `json:"rail"`
	Body       string                 `json:"body"` // BodyFingerprint
	OfferWant  *store.Asset           `json:"offer_want"`
	AcceptPaid *store.Asset           `json:"accept_paid"`
	Errors     []protocols.Code       `json:"errors"` // stateless errors
	Claims     []claim                `json:"claims"`
	Links      []protocols.Link       `json:"links"`
	Checks     []protocols.StateCheck `json:"checks"` // kind, key, want, default
	Sets       []set                  `json:"sets"`
	Handoff    []string               `json:"handoff"`
	// OOPS: install a callback that queues an OOPS (with a stored copy
	// replying to this message) whenever the outcome has errors.
	OOPS bool `json:"oops"`
}

// claim is a protocols.Claim as a scenario writes it: kind, key, value
// and window are its fields by name.
type claim struct {
	protocols.Claim
	OnSame     protocols.Code `json:"on_same"`
	OnConflict protocols.Code `json:"on_conflict"`
}

// set is a protocols.StateSet as a scenario writes it (kind, key, value,
// keep), with its tally written as one.
type set struct {
	protocols.StateSet
	If *tally `json:"if"`
}

// tally is a protocols.Tally over claims only whose rule is: at least
// AtLeast of the claims read hold Value.
type tally struct {
	Kind    string `json:"kind"`
	Prefix  string `json:"prefix"`
	Value   string `json:"value"`
	AtLeast int    `json:"at_least"`
}

type countRule struct {
	value   string
	atLeast int
}

func (r countRule) Resolved(claims, _ map[string]string) bool {
	n := 0
	for _, v := range claims {
		if v == r.value {
			n++
		}
	}
	return n >= r.atLeast
}

type want struct {
	Status     string           `json:"status"`
	Errors     []protocols.Code `json:"errors"` // exact, in order
	Redelivery bool             `json:"redelivery"`
	Replay     bool             `json:"replay"`
	SameAs     string           `json:"same_as"` // the step whose row this is
	Thread     string           `json:"thread"`  // label: equal labels ⇔ equal thread ids
	OOPS       bool             `json:"oops"`    // a courtesy OOPS was queued
	// Payment is the state of the message's payment ("": none).
	Payment string `json:"payment"`
	// Refs are, by error code, the Message-ID the problem's ref names:
	// the earlier message a duplicate repeats.
	Refs map[protocols.Code]string `json:"refs"`
}

func (in input) incoming(t *testing.T) *store.Incoming {
	raw := in.Raw
	if raw == "" {
		raw = fmt.Sprintf("Message-ID: <%s>\r\nFrom: %s\r\nSubject: %s\r\n\r\n{\"id\":%q}\r\n",
			in.MessageID, in.Sender, in.Subject, in.EnvelopayID)
	}
	x := &store.Incoming{
		Mailbox: in.Mailbox, Direction: in.Direction, Raw: []byte(raw), MessageID: in.MessageID,
		InReplyTo: in.InReplyTo, References: in.References, Sender: in.Sender, Recipients: in.Recipients,
		Subject: in.Subject, ReceivedAt: base.Add(time.Duration(in.At) * time.Second),
		Type: in.Type, EnvelopayID: in.EnvelopayID, Refs: in.Refs, ProofFingerprint: in.Proof, BodyFingerprint: in.Body,
		OfferWant: in.OfferWant, AcceptPaid: in.AcceptPaid, Links: in.Links, Handoff: in.Handoff,
		Status: store.StatusAccepted, Result: json.RawMessage(`{"subject":` + quote(in.Subject) + `}`),
		DKIM: json.RawMessage(`[]`),
	}
	if x.Direction == "" {
		x.Direction = store.DirIn
	}
	if len(in.ProofJSON) > 0 {
		id := proof.Identify(in.Chain, in.ProofJSON)
		x.ProofFingerprint = id.Fingerprint
		x.Proof = &store.ProofFacts{Chain: id.Chain, Tx: id.Tx, Token: "USDC", Amount: "1000", Check: in.Rail}
	}
	for _, c := range in.Errors {
		x.Errors = append(x.Errors, protocols.New(c, "", "stateless %s", c))
	}
	if len(x.Errors) > 0 {
		x.Status = store.StatusQuarantined
	}
	for _, c := range in.Claims {
		cl := c.Claim
		cl.OnSame, cl.OnConflict = c.OnSame, c.OnConflict
		x.Claims = append(x.Claims, cl)
	}
	x.Checks = in.Checks
	for _, st := range in.Sets {
		ps := st.StateSet
		if st.If != nil {
			ps.If = &protocols.Tally{Kind: st.If.Kind, Prefix: st.If.Prefix,
				Rule: countRule{value: st.If.Value, atLeast: st.If.AtLeast}}
		}
		x.Sets = append(x.Sets, ps)
	}
	if in.OOPS {
		x.OOPS = oopsFor(x)
	}
	return x
}

// oopsFor returns terms like the pipeline's: an OOPS back to the
// sender, from its first recipient, for the first error of the outcome
// among the codes the scenarios use.
func oopsFor(x *store.Incoming) *store.OOPSTerms {
	return &store.OOPSTerms{To: x.Sender, From: oopsSender(x), Codes: []protocols.Code{
		protocols.CodeUnknownType, protocols.CodeDuplicateID, protocols.CodeDuplicateProof, protocols.CodeAmountMismatch}}
}

func oopsSender(x *store.Incoming) string {
	if len(x.Recipients) > 0 {
		return x.Recipients[0]
	}
	return "agent@here.test"
}

// oopsMail is the OOPS answering x's error code, as the owed-OOPS worker
// queues it.
func oopsMail(x *store.Incoming, code protocols.Code) *store.Outgoing {
	mid := "oops." + x.MessageID
	raw := []byte("Message-ID: <" + mid + ">\r\nIn-Reply-To: <" + x.MessageID + ">\r\nSubject: OOPS | " +
		string(code) + "\r\n\r\n{}\r\n")
	from := oopsSender(x)
	return &store.Outgoing{
		From: from, Recipients: []string{x.Sender}, Raw: raw, MessageID: mid, Kind: "oops",
		Copy: &store.Incoming{
			Mailbox: x.Mailbox, Direction: store.DirOut, Raw: raw, MessageID: mid,
			InReplyTo: []string{x.MessageID}, Sender: from, Recipients: []string{x.Sender},
			Subject: "OOPS | " + string(code), Type: "oops", Refs: map[string]string{"ref": x.EnvelopayID},
			Status: store.StatusAccepted, ReceivedAt: x.ReceivedAt,
		},
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func codes(ps protocols.Problems) []protocols.Code {
	return each(ps, func(p protocols.Problem) protocols.Code { return p.Code })
}

func loadScenarios(t *testing.T) map[string]scenario {
	t.Helper()
	names, err := scenarioFS.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]scenario{}
	for _, n := range names {
		b, err := scenarioFS.ReadFile(path.Join("testdata", n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var sc scenario
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			t.Fatalf("%s: %v", n.Name(), err)
		}
		if len(sc.Steps) == 0 {
			t.Fatalf("%s: no steps", n.Name())
		}
		out[strings.TrimSuffix(n.Name(), ".json")] = sc
	}
	return out
}

func testScenarios(t *testing.T, open func(t *testing.T) Rules) {
	scs := loadScenarios(t)
	names := make([]string, 0, len(scs))
	for n := range scs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		sc := scs[name]
		t.Run(name, func(t *testing.T) {
			s := openStore(t, open)
			runScenario(t, s, sc)
		})
	}
}

func runScenario(t *testing.T, s Rules, sc scenario) {
	ctx := context.Background()
	ids := map[string]int64{}
	threadOf := map[string]string{} // label → thread id
	labelOf := map[string]string{}  // thread id → label
	for i, st := range sc.Steps {
		name := st.Name
		if name == "" {
			name = fmt.Sprint(i)
		}
		in := st.In.incoming(t)
		out, err := s.Ingest(ctx, in)
		if err != nil {
			t.Fatalf("step %s: Ingest: %v", name, err)
		}
		settleOwed(t, s, &out, func(o store.OwedOOPS) *store.Outgoing { return oopsMail(in, o.Code) }, `{"type":"oops"}`)
		ids[name] = out.ID
		w := st.Want
		if w.Status == "" {
			w.Status = store.StatusAccepted
		}
		if out.Status != w.Status {
			t.Errorf("step %s: status %q, want %q (errors %v)", name, out.Status, w.Status, out.Errors)
		}
		wantCodes := w.Errors
		if wantCodes == nil {
			wantCodes = []protocols.Code{}
		}
		if got := codes(out.Errors); !slices.Equal(got, wantCodes) {
			t.Errorf("step %s: errors %v, want %v", name, got, wantCodes)
		}
		for code, ref := range w.Refs {
			got := "(no such error)"
			for _, p := range out.Errors {
				if p.Code == code {
					got = p.Ref
				}
			}
			if got != ref {
				t.Errorf("step %s: %s ref %q, want %q", name, code, got, ref)
			}
		}
		if out.Redelivery != w.Redelivery {
			t.Errorf("step %s: redelivery %v, want %v", name, out.Redelivery, w.Redelivery)
		}
		if out.Replay != w.Replay {
			t.Errorf("step %s: replay %v, want %v", name, out.Replay, w.Replay)
		}
		if !out.Redelivery {
			p, err := s.GetPayment(ctx, out.ID)
			switch {
			case w.Payment == "" && !errors.Is(err, store.ErrNotFound):
				t.Errorf("step %s: payment %+v %v, want none", name, p, err)
			case w.Payment != "" && err != nil:
				t.Errorf("step %s: payment: %v, want %s", name, err, w.Payment)
			case w.Payment != "" && p.State != w.Payment:
				t.Errorf("step %s: payment %s (%s), want %s", name, p.State, p.Reason, w.Payment)
			}
		}
		if (out.QueuedOOPS != 0) != w.OOPS {
			t.Errorf("step %s: queued OOPS %d, want one: %v", name, out.QueuedOOPS, w.OOPS)
		}
		if w.SameAs != "" {
			if out.ID != ids[w.SameAs] {
				t.Errorf("step %s: id %d, want the id of step %s (%d)", name, out.ID, w.SameAs, ids[w.SameAs])
			}
		} else {
			for other, id := range ids {
				if other != name && id == out.ID {
					t.Errorf("step %s: id %d reuses the row of step %s", name, out.ID, other)
				}
			}
		}
		if out.ThreadID == "" {
			t.Errorf("step %s: empty thread id", name)
		}
		if w.Thread != "" {
			if tid, ok := threadOf[w.Thread]; ok && tid != out.ThreadID {
				t.Errorf("step %s: thread %s, want thread %q = %s", name, out.ThreadID, w.Thread, tid)
			}
			if l, ok := labelOf[out.ThreadID]; ok && l != w.Thread {
				t.Errorf("step %s: thread %s is thread %q, want a thread of its own (%q)", name, out.ThreadID, l, w.Thread)
			}
			threadOf[w.Thread], labelOf[out.ThreadID] = out.ThreadID, w.Thread
		}
		// The stored row agrees with the outcome.
		m, err := s.Message(ctx, out.ID)
		if err != nil {
			t.Fatalf("step %s: Message(%d): %v", name, out.ID, err)
		}
		if m.Status != out.Status || m.ThreadID != out.ThreadID || !slices.Equal(codes(m.Errors), codes(out.Errors)) {
			t.Errorf("step %s: stored %s/%s/%v, outcome %s/%s/%v", name, m.Status, m.ThreadID, codes(m.Errors),
				out.Status, out.ThreadID, codes(out.Errors))
		}
		if !w.Redelivery && string(m.Raw) != string(st.In.incoming(t).Raw) {
			t.Errorf("step %s: stored raw differs", name)
		}
	}
	for label, n := range sc.ThreadSizes {
		tid, ok := threadOf[label]
		if !ok {
			t.Fatalf("thread_sizes: no step has thread %q", label)
		}
		ms, err := s.Thread(ctx, tid)
		if err != nil {
			t.Fatalf("Thread(%s): %v", tid, err)
		}
		if len(ms) != n {
			var got []string
			for _, m := range ms {
				got = append(got, m.Direction+":"+m.Subject)
			}
			t.Errorf("thread %q has %d messages %q, want %d", label, len(ms), got, n)
		}
	}
	for target, names := range sc.Handoff {
		var want []int64
		for _, n := range names {
			id, ok := ids[n]
			if !ok {
				t.Fatalf("handoff: no step %q", n)
			}
			want = append(want, id)
		}
		ds, err := s.ClaimDeliveries(ctx, target, base.Add(1000*time.Hour), time.Minute, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, d := range ds {
			got = append(got, d.MessageID)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("hand-off to %s: messages %v, want %v", target, got, want)
		}
	}
	for chain, tip := range sc.ChainTips {
		seq, hash, err := s.ChainTip(ctx, chain)
		if err != nil {
			t.Fatal(err)
		}
		if float64(seq) != tip[0].(float64) || hash != tip[1].(string) {
			t.Errorf("chain %s tip %d %s, want %v %v", chain, seq, hash, tip[0], tip[1])
		}
	}
	if n := queuedOOPS(t, s); n != sc.QueuedOOPS {
		t.Errorf("%d OOPS queued, want %d", n, sc.QueuedOOPS)
	}
}
