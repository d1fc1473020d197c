package deviceplugin

import "github.com/gpushare/gpushare/pkg/watchdog"

// claims is the ledger as the usage watchdog reads it (watchdog.Ledger).
type claims struct{ p *Plugin }

// Claims returns every pod of the pod view with its claim (claimOf), all read from one
// snapshot of the ledger.
func (c claims) Grants() []watchdog.PodGrant {
	grants := c.p.ledger.snapshot()
	pods := c.p.podsOnNode()
	out := make([]watchdog.PodGrant, 0, len(pods))
	for _, pod := range pods {
		out = append(out, watchdog.PodGrant{Pod: pod, Grant: c.p.claimOf(pod, grants)})
	}
	return out
}
