// Package preflight states what a node's NVIDIA container runtime lets a pod choose on its
// own: it reads the runtime's configuration file (config.go) and decides whether a pod's
// own NVIDIA_VISIBLE_DEVICES can widen the cards it was handed (decide.go). share-plugin
// publishes the answer on its node (gpushare.LabelEnvDeviceRequests, a metric, a Warning
// event) and kubectl inspect gpushare -d shows it.
package preflight
