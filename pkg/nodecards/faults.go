package nodecards

import (
	"context"
	"sync"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// FaultLog is the XID fault relay between NVML's fault watch and Health: it remembers each
// card's latest critical XID (the DRA back end's taint effect depends on it) and passes
// every fault on.
type FaultLog struct {
	uuids []string

	mu      sync.Mutex
	lastXID map[string]uint64
}

// NewFaultLog relays faults for the cards uuids, none seen yet.
func NewFaultLog(uuids []string) *FaultLog {
	return &FaultLog{uuids: uuids, lastXID: map[string]uint64{}}
}

// record notes f: for its card, or for every card when NVML could not tell which.
func (l *FaultLog) record(f gpunvml.Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.uuids {
		if f.UUID == "" || f.UUID == u {
			l.lastXID[u] = f.XID
		}
	}
}

// Snapshot is a copy of the latest XIDs by UUID; a card without a fault is absent.
func (l *FaultLog) Snapshot() map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]uint64, len(l.lastXID))
	for u, x := range l.lastXID {
		out[u] = x
	}
	return out
}

// Relay records each fault from in and forwards it to out until ctx is done. The fault is
// recorded before the health tracker sees it, so what is published on its change names it.
func (l *FaultLog) Relay(ctx context.Context, in <-chan gpunvml.Fault, out chan<- gpunvml.Fault) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-in:
			l.record(f)
			select {
			case out <- f:
			case <-ctx.Done():
				return
			}
		}
	}
}
