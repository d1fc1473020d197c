// Package dra is gpushare's kubelet DRA plugin: it publishes one device per card, with the
// card's memory as a consumable capacity many claims share, and prepares each allocated
// claim as a per-claim CDI device holding the claim's cards and its share of their memory.
// The node's cards, their health and XID fault relay, the CDI specs (the simulated cards'
// and the per-claim ones), the limit hook's entry and the isolation-enforced label come
// from pkg/nodecards, which the device plugin (pkg/deviceplugin) shares; this package never
// imports pkg/deviceplugin. See docs/dra.md.
package dra
