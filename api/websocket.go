package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The websocket at /v0 (the SDK's websockets client,
// agentmail@0.5.27 api/resources/websockets): the key comes as ?api_key=
// (or an Authorization: Bearer header), checked and throttled like every
// request. The client sends {"type":"subscribe", "event_types":[…],
// "inbox_ids":[…]} and gets {"type":"subscribed", …} back, then the
// events its subscription selects (of the inboxes its key may see), in
// event-log order. Each subscribe replaces the subscription.
//
// Resuming: the SDK declares no resume field, so envelopd reads one from
// the query — ?last_event_id=evt_N (the event_id of the last event
// handled) — and sends every selected event after it, from the durable
// log: a subscriber that reconnects with it misses nothing its webhook
// would have got, across restarts. Without it the stream starts at the
// events logged after the connection opened.

// wsReadLimit bounds a client frame (subscribe messages are small).
const wsReadLimit = 64 << 10

// wsPing is how often an idle connection is pinged.
const wsPing = 30 * time.Second

type wsError struct {
	Type    string `json:"type"` // "error"
	Name    string `json:"name"`
	Message string `json:"message"`
}

type wsSubscribe struct {
	Type       string   `json:"type"`
	EventTypes []string `json:"event_types"`
	InboxIDs   []string `json:"inbox_ids"`
	PodIDs     []string `json:"pod_ids"`
}

type wsSubscribed struct {
	Type       string   `json:"type"` // "subscribed"
	EventTypes []string `json:"event_types,omitempty"`
	InboxIDs   []string `json:"inbox_ids,omitempty"`
	PodIDs     []string `json:"pod_ids,omitempty"`
}

func (h *Handler) websocket(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("api_key")
	if key == "" {
		if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(k)
		}
	}
	p := h.authenticate(w, r, key)
	if p == nil {
		return
	}
	release, e := h.tenants.OpenSocket(p.KeyID)
	if e != nil {
		writeError(w, e)
		return
	}
	defer release()
	log, err := h.svc.eventLog()
	if err != nil {
		writeError(w, asError(err))
		return
	}
	var after int64
	if v := r.URL.Query().Get("last_event_id"); v != "" {
		n, ok := ParseEventID(v)
		if !ok {
			writeError(w, asError(badField("last_event_id", "want an event id evt_N")))
			return
		}
		after = n
	} else if after, err = log.LastEventID(r.Context()); err != nil {
		writeError(w, asError(err))
		return
	}
	// The server's read and write timeouts are for requests; a websocket
	// lives on (pings find dead peers).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the client
	}
	defer c.CloseNow()
	c.SetReadLimit(wsReadLimit)
	// The key was checked at the upgrade; the watch ends the stream
	// within a second of its revocation.
	// (The watch's context is not the connection's: cancelling a read's
	// context drops the connection without a close frame.)
	wctx, stop := h.tenants.Watch(r.Context(), p.KeyID)
	defer stop()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	revoked := func() bool { return errors.Is(context.Cause(wctx), ErrKeyRevoked) }
	go func() {
		select {
		case <-wctx.Done():
			if revoked() {
				c.Close(websocket.StatusPolicyViolation, "API key revoked")
			}
			cancel()
		case <-ctx.Done():
		}
	}()

	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		return c.Write(wctx, websocket.MessageText, b)
	}

	var mu sync.Mutex
	var sub Subscription
	subscribed := make(chan struct{})
	var once sync.Once
	current := func() Subscription {
		mu.Lock()
		defer mu.Unlock()
		return sub
	}

	// Reader: subscribe messages.
	go func() {
		defer cancel()
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			var m wsSubscribe
			if err := DecodeJSON(b, &m); err != nil || m.Type != "subscribe" {
				msg := "want {\"type\":\"subscribe\", \"event_types\":[…], \"inbox_ids\":[…]}"
				if err != nil {
					msg = asError(err).Message
				}
				if send(wsError{Type: "error", Name: "ValidationError", Message: msg}) != nil {
					return
				}
				continue
			}
			ns := Subscription{EventTypes: m.EventTypes, InboxIDs: m.InboxIDs}
			if err := checkSubscription(&ns); err != nil {
				if send(wsError{Type: "error", Name: "ValidationError", Message: asError(err).Message}) != nil {
					return
				}
				continue
			}
			mu.Lock()
			sub = ns
			mu.Unlock()
			if send(wsSubscribed{Type: "subscribed", EventTypes: ns.EventTypes, InboxIDs: ns.InboxIDs, PodIDs: m.PodIDs}) != nil {
				return
			}
			once.Do(func() { close(subscribed) })
		}
	}()

	// Keepalive.
	go func() {
		t := time.NewTicker(wsPing)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, wsPing)
				err := c.Ping(pctx)
				pcancel()
				if err != nil {
					cancel()
					return
				}
			}
		}
	}()

	select {
	case <-subscribed:
	case <-ctx.Done():
		if !revoked() {
			c.Close(websocket.StatusNormalClosure, "")
		}
		return
	}
	_, err = h.svc.Follow(ctx, p, after, current, func(o EventObject) error { return send(o) })
	if revoked() {
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		h.log.Warn("api: websocket", "err", err)
		send(wsError{Type: "error", Name: "InternalServerError", Message: "event stream failed"})
		c.Close(websocket.StatusInternalError, "event stream failed")
		return
	}
	c.Close(websocket.StatusNormalClosure, "")
}
