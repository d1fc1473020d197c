// Package frontend is what the two front ends of the ledger share, so that they judge and bind
// alike: the HTTP extender (pkg/routes) and the kube-scheduler framework plugin
// (pkg/schedulerplugin). Reasons says why a node fails filter, in the words users read in
// `kubectl describe pod`; Binder writes a pod's Binding with its card annotations in one API
// write and settles what became of a failed one, for the cards pkg/cache reserved.
package frontend
