// Package schedulerplugin is GPUShare, the kube-scheduler framework plugin front end of the
// gpushare ledger (pkg/cache) and placement policies (pkg/policy): the same per-card fit,
// reasons, scores and card choice as the HTTP extender (pkg/routes), without the extender
// protocol's encode and decode of every node name twice per pod, and visible to preemption's
// dry run. cmd/gpushare-scheduler registers it in kube-scheduler; docs/scheduler-plugin.md
// shows the configuration.
//
// Extension points, per scheduling cycle of a pod that requests gpu-mem:
//   - PreFilter reads the pod's request once into the CycleState; a pod whose earlier bind
//     still holds cards is restricted to that node (PreFilterResult).
//   - Filter: per-card fit on each node, with the extender's reasons (kubectl describe pod).
//     AddPod/RemovePod (PreFilterExtensions) let preemption's dry run see the cards victims
//     free, and nominated pods take.
//   - PreScore, Score, NormalizeScore: the policy's rate of the placement on each node,
//     ranked as the extender's prioritize ranks it, 0-100.
//   - Reserve holds the cards in the ledger (Unreserve frees them unless a Binding with them
//     may have landed); Bind writes the Binding carrying the card annotations, one API write.
//
// Pods without gpu-mem are skipped at every point (DefaultBinder binds them), except that
// the fgd policy scores them too, to keep them off the CPU GPU pods need, and that a pod
// whose gpushare ResourceClaims ask memory is narrowed to the DRA nodes that hold them
// (PreFilterResult) and scored on their cards; the claims of the cluster come from an index
// the plugin's informer handlers keep by pool (draIndex).
package schedulerplugin
