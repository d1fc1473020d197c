package deviceplugin

import "github.com/gpushare/gpushare/pkg/watchdog"

// usageLedger is the ledger as the usage watchdog reads it (watchdog.Ledger).
type usageLedger struct{ p *Plugin }

// Grants returns every pod of the pod view with what it holds (allocationOf), all read
// from one snapshot of the ledger.
func (l usageLedger) Grants() []watchdog.PodGrant {
	grants := l.p.ledger.snapshot()
	pods := l.p.podsOnNode()
	out := make([]watchdog.PodGrant, 0, len(pods))
	for _, pod := range pods {
		out = append(out, watchdog.PodGrant{Pod: pod, Grant: l.p.allocationOf(pod, grants)})
	}
	return out
}
