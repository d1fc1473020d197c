// Package policy holds placement as pure functions: which cards of a node a pod's containers
// get, why a pod does not fit a node, and how good a placement is. Plain structs in, results
// out; no client-go, logging or HTTP. All quantities are gpu-mem units.
//
// Every policy shares one fit algorithm (Place) and differs only in the order it prefers
// cards and in how it scores a placement, so filter, prioritize and bind agree: a node passes
// filter exactly when Place finds cards for the pod there, and bind takes the cards Place
// chose. Prioritize rates through a Scorer, which runs that algorithm on per-card buffers it
// reuses from node to node and rates from them without building the Placement; a golden
// digest and a property test hold it to Place and Rate bit for bit.
package policy
