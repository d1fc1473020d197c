// Package dra is gpushare's kubelet DRA plugin: it publishes one device per card, with the
// card's memory as a consumable capacity many claims share, and prepares each allocated
// claim as a per-claim CDI device holding the claim's cards and its share of their memory.
// New receives the node (pkg/noderuntime's Node, which the device plugin receives too):
// its cards, their health and XID fault relay, the API client and recorder, the pod
// informer, what it can enforce of its isolation label and the usage watchdog's settings.
// Run checks the node (start_checks.go), writes its folders (folders.go) and serves
// (serve.go); the driver kubelet calls is driver.go's. The CDI specs (the simulated cards'
// and the per-claim ones), the limit hook's entry and the isolation-enforced label come
// from pkg/nodecards. This package never imports pkg/deviceplugin. See docs/dra.md.
package dra
