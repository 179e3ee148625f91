package api

import (
	"context"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// TestRefusalHoldSpread: holds are drawn from ½ to 1½ RefusalDelay and
// spread over that range, so that clients refused at once do not come
// back at once.
func TestRefusalHoldSpread(t *testing.T) {
	t.Parallel()
	ts := NewTenants(nil, TenantLimits{RefusalDelay: time.Second})
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := ts.hold()
		if d < 500*time.Millisecond || d >= 1500*time.Millisecond {
			t.Fatalf("hold %v, want within [0.5s, 1.5s)", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	// 1,000 uniform draws: the chance that none falls in the lowest or
	// highest tenth is 2·0.9^1000, about 10^-46.
	if lo >= 600*time.Millisecond || hi < 1400*time.Millisecond {
		t.Errorf("holds from %v to %v, want spread over [0.5s, 1.5s)", lo, hi)
	}
}

// TestRefusedHoldsAuthFailuresOnly: a 401 or 429 of Authenticate is held
// (a tarpit slot taken until the hold or the request ends); a 500, no
// error, or a RefusalDelay < 0 returns at once.
func TestRefusedHoldsAuthFailuresOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		e     *Error
		held  bool
	}{
		{"401", time.Hour, &Error{Status: http.StatusUnauthorized}, true},
		{"429", time.Hour, rateLimited(time.Minute), true},
		{"500", time.Hour, &Error{Status: http.StatusInternalServerError}, false},
		{"none", time.Hour, nil, false},
		{"401 without a delay", -1, &Error{Status: http.StatusUnauthorized}, false},
	} {
		ts := NewTenants(nil, TenantLimits{RefusalDelay: tc.delay})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			ts.Refused(ctx, tc.e)
			close(done)
		}()
		if !tc.held {
			<-done
			if n := ts.Held(); n != 0 {
				t.Errorf("%s: %d held after it returned", tc.name, n)
			}
			cancel()
			continue
		}
		for ts.Held() == 0 {
			select {
			case <-done:
				t.Fatalf("%s: returned without holding", tc.name)
			default:
				runtime.Gosched()
			}
		}
		select {
		case <-done:
			t.Fatalf("%s: returned before its hold or request ended", tc.name)
		default:
		}
		cancel()
		<-done
		if n := ts.Held(); n != 0 {
			t.Errorf("%s: %d held after the request ended", tc.name, n)
		}
	}
}

// TestTarpitBounded: past Tarpit answers held at once, the next is
// answered at once.
func TestTarpitBounded(t *testing.T) {
	t.Parallel()
	ts := NewTenants(nil, TenantLimits{RefusalDelay: time.Hour, Tarpit: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{}, 2)
	for range 2 {
		go func() {
			ts.Refused(ctx, &Error{Status: http.StatusUnauthorized})
			done <- struct{}{}
		}()
	}
	for ts.Held() < 2 {
		runtime.Gosched()
	}
	ts.Refused(ctx, &Error{Status: http.StatusUnauthorized}) // returns: no slot
	cancel()
	<-done
	<-done
}
