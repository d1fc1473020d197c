// Package gpushare defines the gpushare wire protocol: extended-resource names, pod and node
// annotation keys, the environment variables handed to containers, memory units and the small
// parse/format helpers around them. It is the only package that spells these names; every
// other package imports them from here.
//
// Compatibility: the names and encodings follow the gpushare protocol that existing pod specs,
// arena and kubectl-inspect-gpushare read (see docs/protocol.md). Additions of our own
// (the node inventory and usage, init-container allocation, Allocate progress and over-grant
// annotations) use the gpushare.io/ prefix and are ignored by old readers.
package gpushare
