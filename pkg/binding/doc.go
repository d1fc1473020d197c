// Package binding binds pods for both front ends of the ledger, the HTTP extender
// (pkg/routes) and the kube-scheduler framework plugin (pkg/schedulerplugin), so that they
// bind alike. A bind runs three steps, in this order and in these files:
//
//   - bind.go, Binder.Bind: hold the cards for the pod in the ledger (cache.Reserve);
//     reserve.go, Binder.ReserveFailed: word a refusal of that step;
//   - write.go, Binder.Write: one API write, the Binding that carries the card annotations,
//     on a deadline that ends within the leader lease when there is one (Binder.Lease);
//   - settle.go: after a failed write, read the pod back to learn whether the Binding
//     landed, and report the outcome to the ledger (cache.Finish), which frees the cards only
//     when the pod is definitely not bound by them.
//
// The extender calls Bind, which runs all three. The plugin keeps kube-scheduler's extension
// points: its Reserve runs cache.Reserve and ReserveFailed, its Bind runs Write.
package binding
