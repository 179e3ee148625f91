package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/envelopd/envelopd/protocols"
	"github.com/envelopd/envelopd/store"
)

// racers is how many goroutines race for one uniqueness fact.
const racers = 16

// testRaces: N sessions ingest at the same moment messages that compete
// for one fact; exactly one must win, whatever the interleaving.
func testRaces(t *testing.T, open func(t *testing.T) Rules) {
	zero := store.ZeroHash
	cases := []struct {
		name string
		// msg builds racer i's message.
		msg func(i int) *store.Incoming
		// losers' status and error code ("" for an exact redelivery).
		loser    string
		code     protocols.Code
		redelivr bool
	}{
		{"same proof", func(i int) *store.Incoming {
			return msg(fmt.Sprintf("p%d@race.test", i), fmt.Sprintf("s%d@race.test", i), fmt.Sprintf("pay_%d", i),
				func(in *store.Incoming) { in.ProofFingerprint = "fp-race" })
		}, store.StatusDuplicate, protocols.CodeDuplicateProof, false},
		{"same sender and id", func(i int) *store.Incoming {
			return msg(fmt.Sprintf("i%d@race.test", i), "alice@race.test", "ord_1", nil)
		}, store.StatusDuplicate, protocols.CodeDuplicateID, false},
		{"same message", func(i int) *store.Incoming {
			return msg("same@race.test", "alice@race.test", "ord_1", nil)
		}, store.StatusAccepted, "", true},
		{"same chain seq", func(i int) *store.Incoming {
			return msg(fmt.Sprintf("l%d@race.test", i), "a@race.test", "", func(in *store.Incoming) {
				in.Links = []protocols.Link{{Chain: "a>b", Seq: 1, Prev: zero, Hash: fmt.Sprintf("h%d", i)}}
			})
		}, store.StatusDuplicate, protocols.CodeReplayDetected, false},
		{"same claim, other values", func(i int) *store.Incoming {
			return msg(fmt.Sprintf("c%d@race.test", i), "a@race.test", "", func(in *store.Incoming) {
				in.Claims = []protocols.Claim{{Kind: "vcp_idem", Key: "a\x00k", Value: fmt.Sprint(i),
					OnConflict: protocols.CodeIdempotencyConflict}}
			})
		}, store.StatusQuarantined, protocols.CodeIdempotencyConflict, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t, open)
			outs := raceIngest(t, []Rules{s}, racers, c.msg)
			winners := 0
			ids := map[int64]bool{}
			for i, o := range outs {
				ids[o.ID] = true
				if o.Status == store.StatusAccepted && !o.Redelivery {
					winners++
					continue
				}
				if o.Status != c.loser || o.Redelivery != c.redelivr {
					t.Errorf("racer %d lost as %s (redelivery %v), want %s (redelivery %v)", i, o.Status, o.Redelivery, c.loser, c.redelivr)
				}
				if c.code != "" && !o.Errors.Has(c.code) {
					t.Errorf("racer %d: errors %v, want %s", i, codes(o.Errors), c.code)
				}
			}
			if winners != 1 {
				t.Errorf("%d winners, want exactly 1", winners)
			}
			wantRows := racers
			if c.redelivr {
				wantRows = 1
			}
			if len(ids) != wantRows {
				t.Errorf("%d distinct rows, want %d", len(ids), wantRows)
			}
			ds, err := s.ClaimDeliveries(context.Background(), "exec", base.Add(1000*time.Hour), time.Minute, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 {
				t.Errorf("%d hand-offs, want 1", len(ds))
			}
		})
	}
}

// msg is a minimal accepted incoming message handed off to "exec".
func msg(mid, sender, eid string, edit func(*store.Incoming)) *store.Incoming {
	in := &store.Incoming{
		Direction: store.DirIn, MessageID: mid, Sender: sender, Recipients: []string{"agent@here.test"},
		Raw:         []byte("Message-ID: <" + mid + ">\r\nFrom: " + sender + "\r\n\r\n" + eid + "\r\n"),
		EnvelopayID: eid, Status: store.StatusAccepted, ReceivedAt: base, Handoff: []string{"exec"},
		Subject: "PAY | " + eid, Type: "pay",
	}
	if edit != nil {
		edit(in)
	}
	return in
}
