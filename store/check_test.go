package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// TestCheck: Check reports what Ingest would (ACCEPT against its OFFER's
// want) plus unknown typed refs, and writes nothing.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	offer := &store.Incoming{Direction: store.DirIn, Raw: []byte("offer"), MessageID: "o@s.test", Sender: "s@s.test",
		Recipients: []string{"b@b.test"}, Type: "offer", EnvelopayID: "ofr_1", Status: store.StatusAccepted,
		OfferWant: &store.Asset{Amount: "30", Token: "USDC", Chain: "base"}}
	if _, err := s.Ingest(ctx, offer); err != nil {
		t.Fatal(err)
	}
	accept := func(amount, ref string) *store.Incoming {
		return &store.Incoming{Direction: store.DirOut, Raw: []byte("accept " + amount + ref), MessageID: "a" + amount + ref + "@b.test",
			Sender: "b@b.test", Recipients: []string{"s@s.test"}, Type: "accept", EnvelopayID: "acc_1", Status: store.StatusAccepted,
			Refs: map[string]string{"offer_ref": ref}, AcceptPaid: &store.Asset{Amount: amount, Token: "USDC", Chain: "base"}}
	}
	for _, c := range []struct {
		name   string
		in     *store.Incoming
		status string
		codes  []protocols.Code
	}{
		{"matching", accept("30", "ofr_1"), store.StatusAccepted, nil},
		{"short", accept("20", "ofr_1"), store.StatusQuarantined, []protocols.Code{protocols.CodeAmountMismatch}},
		{"unknown ref", accept("30", "ofr_2"), store.StatusQuarantined, []protocols.Code{protocols.CodeUnknownRef}},
		{"ref of another type", func() *store.Incoming {
			in := accept("30", "")
			in.Refs = map[string]string{"order_ref": "ofr_1"}
			return in
		}(), store.StatusQuarantined, []protocols.Code{protocols.CodeUnknownRef}},
	} {
		oc, err := s.Check(ctx, c.in)
		var got []protocols.Code
		for _, p := range oc.Errors {
			got = append(got, p.Code)
		}
		if err != nil || oc.Status != c.status || !slices.Equal(got, c.codes) || oc.ID != 0 {
			t.Errorf("%s: %+v %v; want %s %v", c.name, oc, err, c.status, c.codes)
		}
	}
	// Nothing was written: the matching ACCEPT's id is still free.
	ms, err := s.Messages(ctx, store.Filter{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("after Check: %d messages %v, want the OFFER only", len(ms), err)
	}
	oc, err := s.Ingest(ctx, accept("30", "ofr_1"))
	if err != nil || oc.Status != store.StatusAccepted {
		t.Errorf("ingest after Check: %+v %v", oc, err)
	}
}

func TestSettings(t *testing.T) {
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, at, err := s.Setting(ctx, store.SettingOutbound); v != "" || !at.IsZero() || err != nil {
		t.Errorf("unset: %q %v %v", v, at, err)
	}
	for _, want := range []string{store.OutboundNone, store.OutboundSmarthost} {
		if err := s.SetSetting(ctx, store.SettingOutbound, want); err != nil {
			t.Fatal(err)
		}
		if v, at, err := s.Setting(ctx, store.SettingOutbound); v != want || at.IsZero() || err != nil {
			t.Errorf("after setting %q: %q %v %v", want, v, at, err)
		}
	}
}
