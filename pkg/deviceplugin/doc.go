// Package deviceplugin is share-plugin's kubelet device plugin: it advertises one fake
// device per gpu-mem unit of every card, tells kubelet which card a container gets (the card
// the extender wrote into the pod's annotations, or one it chooses itself for a pod without
// a valid allocation) after checking the card against its own ledger of the node's pods,
// publishes the node's per-card inventory and gpu-count, tracks card health from NVML
// XID events, and (with a usage interval) watches the GPU memory each container's
// processes use against its grant (watchdog.go).
//
// It depends on pkg/nvml's narrow Interface, never on NVML itself.
package deviceplugin
