// Package deviceplugin is share-plugin's kubelet device plugin: it advertises one fake
// device per gpu-mem unit of every card, tells kubelet which card a container gets (the card
// the extender wrote into the pod's allocation record, or one it chooses itself for a pod
// without a valid one) after checking the card against its own ledger of the node's pods,
// publishes the node's per-card inventory and gpu-count, tracks card health from NVML XID
// events, and (with a usage interval) runs the usage watchdog of pkg/watchdog, which reads
// the ledger through usage_ledger.go.
//
// Allocate reads top to bottom through these files, in this order:
//
//   - allocate.go: the gRPC entry, one container at a time;
//   - match.go: find the candidate container kubelet is admitting (podresources.go asks
//     kubelet which pod that is);
//   - decide.go: the node's isolation rule, then which cards, checked against the ledger;
//   - respond.go: refuse, or write the progress on the pod, grant it in the ledger, and
//     hand over the cards (and, on an MPS node, the daemon's folders); with the
//     cdi-allocation strategy through the allocation's CDI spec (nodecards.CardSpecs), which
//     on a limit node also names the limit hook (limit.go);
//   - ledger.go: the grants this process made, by pod, and the states of a grant; a pod
//     whose grant goes takes its allocation specs with it.
//
// Around it: config.go and plugin.go (New over the node), run.go (Run's goroutines), register.go (the
// gRPC socket and kubelet registration), listandwatch.go and preferred.go (the other
// device-plugin calls), allocation_records.go (adopting served pods after a restart and
// keeping their allocation records true), node.go (inventory, gpu-count and, from
// limit.go, the enforced isolation on the node),
// served_report.go and metrics.go (GET /served, /metrics, /healthz), allocation_spec.go
// (when the per-allocation CDI specs go: with the ledger's release of the pod and, for pods
// gone meanwhile, at start), runtime_devices.go (which CDI registry share-plugin reads, and
// the log of what it found there); registrations wake the node publisher through
// internal/broadcast. A pod's allocation record is its annotations (the gpushare
// protocol's word); a grant is what the ledger remembers handing out.
//
// New receives the node (pkg/noderuntime's Node, which the DRA back end receives too): its
// cards in the node's unit, their health fed by NVML's XID faults, the API client and
// recorder, the pod informer, what the node can enforce of its isolation label and the
// usage watchdog's settings. Every CDI spec it writes (the simulated cards' and the
// per-allocation ones), the limit hook's entry and the isolation-enforced label come from
// pkg/nodecards. This package never imports pkg/dra. It depends on pkg/nvml's narrow
// Interface, never on NVML itself.
package deviceplugin
