// Package policy holds placement as pure functions: which cards of a node a pod's containers
// get, why a pod does not fit a node, and how good a placement is. Plain structs in, results
// out; no client-go, logging or HTTP. All quantities are gpu-mem units.
//
// Every policy shares one fit algorithm (Place) and differs only in the order it prefers
// cards and in how it scores a placement, so filter, prioritize and bind agree: a node passes
// filter exactly when Place finds cards for the pod there, and bind takes the cards Place
// chose.
//
// Two words, as in the kube-scheduler's score plugins (Score, then NormalizeScore):
//
//   - A policy scores a placement (Policy.Score): a float64 on the policy's own continuous
//     scale, higher is better, meaningful only against the same pod's scores on other nodes.
//     Prioritize scores through a Scorer (Scorer.Score), which runs the fit algorithm on
//     per-card buffers it reuses from node to node and scores from them without building the
//     Placement; a golden digest and a property test hold it to Place and Policy.Score bit
//     for bit. NewFirstFitScorer does the same for the DRA path, where the allocator's
//     FirstFit picks the cards and the policy only scores them (held to FirstFit and
//     Policy.Score by a property test).
//   - NormalizeScores normalizes one pod's scores on the candidate nodes to the integer
//     0..MaxScore that the extender answers and the framework plugin multiplies up to 0-100.
package policy
