// Package cache keeps the extender's view of GPU-sharing nodes: for every node its cards
// (from gpushare.Resources.NodeInventory) and the gpu-mem units that placed pods and bind-time
// reservations hold on each card. It is fed by client-go shared informers handed in by main,
// whose stores it turns into slim objects (Pod, and a node type of its own) with transforms,
// and answers the filter, prioritize, bind and inspect handlers.
//
// Pods' annotations are tenant-writable: what a placed pod counts is decided from the records
// it has shown that are valid for its request, and from the reservation bind made for it,
// never taken as written (trust.go; docs/extender.md, "What the ledger trusts").
//
// All quantities are gpu-mem units (GiB by default). The cache interprets the unit only to
// sum the cluster's capacity (Capacity) over nodes publishing different ones.
//
// Locking: an RWMutex guards the node map, a mutex per node guards that node's cards and
// pods, so a bind on one node never blocks filter on another. Pod mutations (informer events,
// Reserve, Finish, expiry) are additionally serialised by podsMu so that a pod's uid lives
// on at most one node. Lock order: podsMu, then Cache.mu, then nodeState.mu; the capacity
// book's lock and the workload books' own locks (hostBook, then constraintBook; shapeBook)
// are taken last and held briefly. No lock is held across API calls.
package cache
