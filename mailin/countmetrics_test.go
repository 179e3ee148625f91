package mailin

import (
	"sync"
	"time"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// countMetrics is a Metrics (and BusyObserver) for tests in this package,
// which cannot import mailin/metrics (it imports mailin): it counts the
// suppressed-OOPS reasons and the in-flight refusals it is told of.
type countMetrics struct {
	mu         sync.Mutex
	busy       int
	suppressed map[string]int
}

func (m *countMetrics) Observe(_ *store.Incoming, _ *message.Analysis, out store.Outcome, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if out.OOPS != nil && !out.OOPS.Sent {
		if m.suppressed == nil {
			m.suppressed = map[string]int{}
		}
		m.suppressed[out.OOPS.Reason]++
	}
}

func (m *countMetrics) ObserveInFlightBusy() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.busy++
}

func (m *countMetrics) counts() (busy int, suppressed map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.busy, m.suppressed
}
