package deviceplugin

import "github.com/gpushare/gpushare/pkg/watchdog"

// claims is the ledger as the usage watchdog reads it (watchdog.Ledger).
type claims struct{ p *Plugin }

// Claims returns every pod of the pod view with its claim (claimOf), all read from one
// snapshot of the ledger.
func (c claims) Claims() []watchdog.PodClaim {
	grants := c.p.ledger.snapshot()
	pods := c.p.podsOnNode()
	out := make([]watchdog.PodClaim, 0, len(pods))
	for _, pod := range pods {
		out = append(out, watchdog.PodClaim{Pod: pod, Claim: c.p.claimOf(pod, grants)})
	}
	return out
}
