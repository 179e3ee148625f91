package imapview

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	gomessage "github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
)

// raw returns the bytes the view serves for a message: its verdict
// header (entry.head) followed by the bytes as received and stored, in
// which an Authentication-Results field claiming the view's own
// authserv-id is renamed (renameForged; same length).
func (ss *session) raw(e *entry) ([]byte, error) {
	m, err := ss.s.opts.Store.Message(ss.ctx(), e.id)
	if err != nil {
		return nil, fmt.Errorf("imap view: message %d: %w", e.id, err)
	}
	b := make([]byte, 0, len(e.head)+len(m.Raw))
	b = append(append(b, e.head...), m.Raw...)
	renameForged(b[len(e.head):], ss.s.host())
	return b, nil
}

func (ss *session) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	v := ss.sel
	markSeen := false
	for _, bs := range options.BodySection {
		if !bs.Peek {
			markSeen = !v.readOnly
		}
	}
	needRaw := options.Envelope || options.BodyStructure != nil || len(options.BodySection) > 0 ||
		len(options.BinarySection) > 0 || len(options.BinarySectionSize) > 0
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	type item struct {
		seq uint32
		e   *entry
	}
	var items []item
	v.forEachLocked(numSet, func(seq uint32, e *entry) { items = append(items, item{seq, e}) })
	if markSeen {
		set := map[uint32][]string{}
		for _, it := range items {
			if !it.e.has(imap.FlagSeen) {
				set[uint32(it.e.uid)] = append(it.e.flagStrings(), string(imap.FlagSeen))
			}
		}
		if len(set) > 0 {
			if err := ss.s.opts.Store.SetFlags(ss.ctx(), f.mailbox, f.name, set); err != nil {
				return err
			}
			for _, it := range items {
				if _, ok := set[uint32(it.e.uid)]; ok {
					it.e.flags = applyFlags(it.e.flags, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagSeen}})
					f.tracker.QueueMessageFlags(it.seq, it.e.uid, it.e.flags, v.t)
				}
			}
		}
	}
	for _, it := range items {
		var raw []byte
		if needRaw {
			var err error
			if raw, err = ss.raw(it.e); err != nil {
				return err
			}
		}
		rw := w.CreateMessage(v.t.EncodeSeqNum(it.seq))
		if err := fetchOne(rw, it.e, raw, options, markSeen); err != nil {
			return err
		}
	}
	return nil
}

// fetchOne writes one FETCH response. BODY[] (no part, no header filter)
// is the served bytes themselves (the verdict header, then the stored
// bytes), never a re-serialised header.
func fetchOne(w *imapserver.FetchResponseWriter, e *entry, raw []byte, options *imap.FetchOptions, seenChanged bool) error {
	w.WriteUID(e.uid)
	if options.Flags || seenChanged {
		w.WriteFlags(e.flags)
	}
	if options.InternalDate {
		w.WriteInternalDate(e.t)
	}
	if options.RFC822Size {
		w.WriteRFC822Size(e.size)
	}
	if options.Envelope {
		br := bufio.NewReader(bytes.NewReader(raw))
		if h, err := textproto.ReadHeader(br); err == nil {
			w.WriteEnvelope(imapserver.ExtractEnvelope(h))
		} else {
			w.WriteEnvelope(&imap.Envelope{})
		}
	}
	if options.BodyStructure != nil {
		w.WriteBodyStructure(imapserver.ExtractBodyStructure(bytes.NewReader(raw)))
	}
	for _, bs := range options.BodySection {
		var buf []byte
		if len(bs.Part) == 0 && bs.Specifier == imap.PartSpecifierNone && len(bs.HeaderFields) == 0 && len(bs.HeaderFieldsNot) == 0 {
			buf = partial(raw, bs.Partial)
		} else {
			buf = imapserver.ExtractBodySection(bytes.NewReader(raw), bs)
		}
		if err := writeAll(w.WriteBodySection(bs, int64(len(buf))), buf); err != nil {
			return err
		}
	}
	for _, bs := range options.BinarySection {
		buf := imapserver.ExtractBinarySection(bytes.NewReader(raw), bs)
		if err := writeAll(w.WriteBinarySection(bs, int64(len(buf))), buf); err != nil {
			return err
		}
	}
	for _, bss := range options.BinarySectionSize {
		w.WriteBinarySectionSize(bss, imapserver.ExtractBinarySectionSize(bytes.NewReader(raw), bss))
	}
	return w.Close()
}

func partial(b []byte, p *imap.SectionPartial) []byte {
	if p == nil {
		return b
	}
	if p.Offset >= int64(len(b)) {
		return nil
	}
	end := p.Offset + p.Size
	if end > int64(len(b)) {
		end = int64(len(b))
	}
	return b[p.Offset:end]
}

func writeAll(wc io.WriteCloser, b []byte) error {
	_, err := wc.Write(b)
	if cerr := wc.Close(); err == nil {
		err = cerr
	}
	return err
}

func (ss *session) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, options *imap.StoreOptions) error {
	v := ss.sel
	if v.readOnly {
		return errReadOnly
	}
	f := v.f
	f.mu.Lock()
	type change struct {
		seq   uint32
		e     *entry
		flags []imap.Flag
	}
	var changes []change
	set := map[uint32][]string{}
	v.forEachLocked(numSet, func(seq uint32, e *entry) {
		nf := applyFlags(e.flags, flags)
		changes = append(changes, change{seq, e, nf})
		s := make([]string, len(nf))
		for i, x := range nf {
			s[i] = string(x)
		}
		set[uint32(e.uid)] = s
	})
	if len(set) > 0 {
		if err := ss.s.opts.Store.SetFlags(ss.ctx(), f.mailbox, f.name, set); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	for _, c := range changes {
		c.e.flags = c.flags
		f.tracker.QueueMessageFlags(c.seq, c.e.uid, c.e.flags, v.t)
	}
	f.mu.Unlock()
	if flags.Silent {
		return nil
	}
	return ss.Fetch(w, numSet, &imap.FetchOptions{Flags: true})
}

// forEachLocked calls fn for each message of numSet in sequence order,
// with its server-side sequence number; f.mu must be held.
func (v *view) forEachLocked(numSet imap.NumSet, fn func(seq uint32, e *entry)) {
	numSet = v.staticNumSet(numSet)
	for i, e := range v.f.msgs {
		seq := uint32(i) + 1
		var ok bool
		switch ns := numSet.(type) {
		case imap.SeqSet:
			c := v.t.EncodeSeqNum(seq)
			ok = c != 0 && ns.Contains(c)
		case imap.UIDSet:
			ok = ns.Contains(e.uid)
		}
		if ok {
			fn(seq, e)
		}
	}
}

// staticNumSet resolves "*" and the SEARCHRES marker "$" (as imapmemserver).
func (v *view) staticNumSet(numSet imap.NumSet) imap.NumSet {
	if imap.IsSearchRes(numSet) {
		return v.searchRes
	}
	switch ns := numSet.(type) {
	case imap.SeqSet:
		top := uint32(len(v.f.msgs))
		out := make(imap.SeqSet, len(ns))
		for i, r := range ns {
			out[i] = r
			staticRange(&out[i].Start, &out[i].Stop, top)
		}
		return out
	case imap.UIDSet:
		var top uint32
		if n := len(v.f.msgs); n > 0 {
			top = uint32(v.f.msgs[n-1].uid)
		}
		out := make(imap.UIDSet, len(ns))
		for i, r := range ns {
			out[i] = r
			staticRange((*uint32)(&out[i].Start), (*uint32)(&out[i].Stop), top)
		}
		return out
	}
	return numSet
}

func staticRange(start, stop *uint32, top uint32) {
	dyn := false
	if *start == 0 {
		*start, dyn = top, true
	}
	if *stop == 0 {
		*stop, dyn = top, true
	}
	if dyn && *start > *stop {
		*start, *stop = *stop, *start
	}
}

func (ss *session) Search(kind imapserver.NumKind, criteria *imap.SearchCriteria, options *imap.SearchOptions) (*imap.SearchData, error) {
	v := ss.sel
	f := v.f
	f.mu.Lock()
	defer f.mu.Unlock()
	v.staticCriteria(criteria)
	var data imap.SearchData
	var seqs imap.SeqSet
	var uids imap.UIDSet
	for i, e := range f.msgs {
		seq := v.t.EncodeSeqNum(uint32(i) + 1)
		m := &searchMsg{ss: ss, e: e}
		ok, err := m.match(seq, criteria)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		uids.AddNum(e.uid)
		num := uint32(e.uid)
		if kind == imapserver.NumKindSeq {
			if seq == 0 {
				continue
			}
			seqs.AddNum(seq)
			num = seq
		}
		if data.Min == 0 || num < data.Min {
			data.Min = num
		}
		if num > data.Max {
			data.Max = num
		}
		data.Count++
	}
	if kind == imapserver.NumKindSeq {
		data.All = seqs
	} else {
		data.All = uids
	}
	if options != nil && options.ReturnSave {
		v.searchRes = uids
	}
	return &data, nil
}

func (v *view) staticCriteria(c *imap.SearchCriteria) {
	seqs := make([]imap.SeqSet, 0, len(c.SeqNum))
	for _, s := range c.SeqNum {
		switch ns := v.staticNumSet(s).(type) {
		case imap.SeqSet:
			seqs = append(seqs, ns)
		case imap.UIDSet:
			c.UID = append(c.UID, ns)
		}
	}
	c.SeqNum = seqs
	for i, u := range c.UID {
		c.UID[i] = v.staticNumSet(u).(imap.UIDSet)
	}
	for i := range c.Not {
		v.staticCriteria(&c.Not[i])
	}
	for i := range c.Or {
		v.staticCriteria(&c.Or[i][0])
		v.staticCriteria(&c.Or[i][1])
	}
}

// searchMsg evaluates SEARCH criteria (RFC 9051 §6.4.4) against one
// message, reading its bytes only when a criterion needs them.
type searchMsg struct {
	ss  *session
	e   *entry
	raw []byte
}

func (m *searchMsg) bytes() ([]byte, error) {
	if m.raw == nil {
		b, err := m.ss.raw(m.e)
		if err != nil {
			return nil, err
		}
		m.raw = b
	}
	return m.raw, nil
}

func (m *searchMsg) entity() (*gomessage.Entity, error) {
	b, err := m.bytes()
	if err != nil {
		return nil, err
	}
	ent, _ := gomessage.Read(bytes.NewReader(b))
	if ent == nil {
		ent, _ = gomessage.New(gomessage.Header{}, bytes.NewReader(nil))
	}
	return ent, nil
}

func (m *searchMsg) match(seq uint32, c *imap.SearchCriteria) (bool, error) {
	e := m.e
	for _, s := range c.SeqNum {
		if seq == 0 || !s.Contains(seq) {
			return false, nil
		}
	}
	for _, u := range c.UID {
		if !u.Contains(e.uid) {
			return false, nil
		}
	}
	if !matchDate(e.t, c.Since, c.Before) {
		return false, nil
	}
	for _, fl := range c.Flag {
		if !e.has(fl) {
			return false, nil
		}
	}
	for _, fl := range c.NotFlag {
		if e.has(fl) {
			return false, nil
		}
	}
	if c.Larger != 0 && e.size <= c.Larger {
		return false, nil
	}
	if c.Smaller != 0 && e.size >= c.Smaller {
		return false, nil
	}
	if len(c.Header) > 0 || !c.SentSince.IsZero() || !c.SentBefore.IsZero() {
		ent, err := m.entity()
		if err != nil {
			return false, err
		}
		h := mail.Header{Header: ent.Header}
		for _, hc := range c.Header {
			if !matchFields(h.FieldsByKey(hc.Key), hc.Value) {
				return false, nil
			}
		}
		if !c.SentSince.IsZero() || !c.SentBefore.IsZero() {
			t, err := h.Date()
			if err != nil || !matchDate(t, c.SentSince, c.SentBefore) {
				return false, nil
			}
		}
	}
	// TEXT searches the header and the body, BODY the body only
	// (RFC 9051 section 6.4.4).
	for _, s := range [...]struct {
		texts      []string
		withHeader bool
	}{{c.Text, true}, {c.Body, false}} {
		for _, text := range s.texts {
			ent, err := m.entity()
			if err != nil {
				return false, err
			}
			if !matchEntity(ent, text, s.withHeader) {
				return false, nil
			}
		}
	}
	for i := range c.Not {
		ok, err := m.match(seq, &c.Not[i])
		if err != nil || ok {
			return false, err
		}
	}
	for i := range c.Or {
		a, err := m.match(seq, &c.Or[i][0])
		if err != nil {
			return false, err
		}
		if a {
			continue
		}
		if b, err := m.match(seq, &c.Or[i][1]); err != nil || !b {
			return false, err
		}
	}
	return true, nil
}

// matchDate compares dates without time zone (RFC 9051 §6.4.4).
func matchDate(t, since, before time.Time) bool {
	t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if !since.IsZero() && t.Before(since) {
		return false
	}
	return before.IsZero() || t.Before(before)
}

func matchFields(fields gomessage.HeaderFields, pattern string) bool {
	if pattern == "" {
		return fields.Len() > 0
	}
	pattern = strings.ToLower(pattern)
	for fields.Next() {
		v, _ := fields.Text()
		if strings.Contains(strings.ToLower(v), pattern) {
			return true
		}
	}
	return false
}

func matchEntity(e *gomessage.Entity, pattern string, withHeader bool) bool {
	if pattern == "" {
		return true
	}
	if withHeader && matchFields(e.Header.Fields(), pattern) {
		return true
	}
	if mr := e.MultipartReader(); mr != nil {
		for {
			p, err := mr.NextPart()
			if err != nil {
				return false
			}
			if matchEntity(p, pattern, withHeader) {
				return true
			}
		}
	}
	t, _, err := e.Header.ContentType()
	if err != nil || !(strings.HasPrefix(t, "text/") || strings.HasPrefix(t, "message/")) {
		return false
	}
	b, err := io.ReadAll(e.Body)
	return err == nil && bytes.Contains(bytes.ToLower(b), bytes.ToLower([]byte(pattern)))
}
