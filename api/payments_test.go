package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/envelopd/envelopd/store"
)

// TestWebsocketPaymentEvents: a payment settling is an event on the
// websocket (payment.verified, payment.rejected) carrying the payment,
// and the message's envelopay extension carries its payment object.
func TestWebsocketPaymentEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := e.subscribe(t, ctx, e.key, "", map[string]any{"event_types": []string{store.EventPaymentVerified, store.EventPaymentRejected}})
	var ids []int64
	for i, tx := range []string{"0x" + strings.Repeat("1", 64), "0x" + strings.Repeat("2", 64)} {
		mid := []string{"p1@buyer.test", "p2@buyer.test"}[i]
		out, err := e.st.Ingest(ctx, &store.Incoming{Direction: store.DirIn, Raw: []byte("Message-ID: <" + mid + ">\r\n\r\nx\r\n"), MessageID: mid,
			Sender: "b@buyer.test", Recipients: []string{"a@shop.test"}, Subject: "PAY | x", Type: "pay", Status: store.StatusAccepted,
			ReceivedAt: time.Now(), ProofFingerprint: tx, Proof: &store.ProofFacts{Chain: "base", Tx: tx, Token: "USDC", Amount: "5", Check: true}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	ps, err := e.st.ClaimPayments(ctx, time.Now(), time.Minute, 10, nil)
	if err != nil || len(ps) != 2 {
		t.Fatalf("claim: %v %v", ps, err)
	}
	if err := e.st.SettlePayment(ctx, ids[0], store.Settlement{State: store.PaymentVerified, Paid: "5", To: "0xabc", From: "0xdef"}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SettlePayment(ctx, ids[1], store.Settlement{State: store.PaymentFailed, Reason: "reverted"}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"verified", "failed"} {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			EventType string `json:"event_type"`
			Payment   struct {
				ID    int64  `json:"id"`
				State string `json:"state"`
			} `json:"payment"`
			Message struct {
				Envelopay struct {
					Payment struct {
						State string `json:"state"`
						Tx    string `json:"tx"`
					} `json:"payment"`
				} `json:"envelopay"`
			} `json:"message"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		wantType := store.EventPaymentVerified
		if want != "verified" {
			wantType = store.EventPaymentRejected
		}
		if ev.EventType != wantType || ev.Payment.ID != ids[i] || ev.Payment.State != want || ev.Message.Envelopay.Payment.State != want ||
			ev.Message.Envelopay.Payment.Tx == "" {
			t.Errorf("event %d: %s", i, b)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}
