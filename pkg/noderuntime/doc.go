// Package noderuntime is what share-plugin's two back ends, the kubelet device plugin
// (pkg/deviceplugin) and the kubelet DRA plugin (pkg/dra), receive from the node: one Node,
// built once at start-up and handed to the back end's New. It holds what both need and
// neither owns: the API client, the event recorder and the node's name; NVML and the
// cards it reports, counted in the node's gpu-mem unit; the cards' health fed by NVML's
// XID faults through the fault relay; what the node can enforce of its isolation label
// (per-cgroup limit support, the container runtime's isolation blocker) and the label that
// says so; and the usage watchdog's inputs (the node's pod informer, the over-grant
// settings, the proc root).
//
// It sits beside pkg/nodecards rather than in it: nodecards is the cards' library (cards,
// health, fault log, CDI specs, the limit hook's entry), usable piece by piece and tested
// without an API server; this package is the assembled runtime over it, with the API
// client, informers, the clock and NVML itself. Both back ends import it; it imports
// neither, and reaches NVML only through pkg/nvml.
//
// Files: node.go (Config, Node, New: NVML discovery to cards, health and fault relay),
// health.go (WatchHealth: NVML's fault watch, the relay, the health tracker), pods.go (the
// node's pod informer), isolation.go (limit support, the isolation blocker and the
// isolation-enforced label), watchdog.go (the usage watchdog over a back end's ledger),
// backend.go (the node's back-end label), open.go (Open: the NVML library or the
// simulator, the API client and the event recorder, as share-plugin's flags set them).
//
// Memory is in MiB (gpushare.Device.MemoryMiB) or whole units of the node's gpushare.Unit
// (gpushare.Device.Units).
package noderuntime
