// Package dra is gpushare's kubelet DRA plugin: it publishes one device per card, with the
// card's memory as a consumable capacity many claims share, and prepares each allocated
// claim as a per-claim CDI device holding the claim's cards and its share of their memory.
// See docs/dra.md.
package dra
