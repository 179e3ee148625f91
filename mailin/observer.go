package mailin

import (
	"time"

	"github.com/envelopd/envelopd/message"
	"github.com/envelopd/envelopd/store"
)

// Metrics records the outcome of each message the pipeline stores.
// Package mailin/metrics implements it with Prometheus; it is an interface
// so that mailin (and mailin/relaytest, which agents import in their
// tests) does not depend on the Prometheus client.
type Metrics interface {
	// Observe is called once per Ingest that stored (or found already
	// stored) a message, with the time from raw bytes to durable commit.
	Observe(in *store.Incoming, a *message.Analysis, out store.Outcome, d time.Duration)
}

// BusyObserver is implemented by Metrics that also count DATA refused
// with 451 4.3.2 because the in-flight byte budget stayed full.
type BusyObserver interface {
	ObserveInFlightBusy()
}
