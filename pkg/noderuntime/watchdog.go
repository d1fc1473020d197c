package noderuntime

import (
	"time"

	"github.com/gpushare/gpushare/pkg/watchdog"
)

// NewWatchdog is the usage watchdog over the node's cards with the node's Usage settings,
// granting each container what ledger says (the back end's view of its grants); it
// publishes the node's usage at least every resync. It starts nothing; with a Usage
// Interval of 0 it is never run and serves only its (empty) metrics.
func (n *Node) NewWatchdog(ledger watchdog.Ledger, resync time.Duration) *watchdog.Watchdog {
	u := n.cfg.Usage
	return watchdog.New(watchdog.Config{
		NodeName: n.cfg.Name, Cards: n.cards, Unit: n.cfg.Unit, Processes: n.cfg.NVML.Processes,
		Utilization: n.cfg.NVML.ProcessUtilization,
		Client:      n.cfg.Client, Recorder: n.cfg.Recorder, Clock: n.cfg.Clock,
		Interval: u.Interval, Resync: resync, OverGrant: u.OverGrant, ProcRoot: u.ProcRoot,
		Unclaimed: watchdog.Unclaimed{ExemptNamespaces: u.UnclaimedExemptNamespaces},
	}, ledger)
}
