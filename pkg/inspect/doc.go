// Package inspect implements `kubectl inspect gpushare`: GPU-memory occupancy per card of the
// GPU-sharing nodes, the pods waiting for gpu-mem with the scheduler's last reason, and
// (--check) a comparison of the pods' annotations with the extender's ledger and the cards
// share-plugin served, and (--verify) a run of gpushare-probe in one pod per GPU-sharing node
// that says whether the node's isolation holds (verify*.go; the probe is pkg/probe).
//
// NewCommand and ExitCode are the package's exports. Inside, the work is split:
//   - buildModel and buildPending are pure: API objects in, a model out (no client, no I/O).
//   - renderSummary, renderDetails, renderPending, writeJSON and writeYAML write a model to an
//     io.Writer; the model's field names and JSON tags are the -o json/yaml output shape.
//     The text forms keep the column names and cluster line of the old
//     kubectl-inspect-gpushare so scripts that parse them keep working.
//   - buildAnnotatedView and compareViews are --check's pure part: API objects and the
//     decoded extender and share-plugin answers in, problem lines out.
//   - fetch.go talks to the API server (a kubernetes.Interface), always with field
//     selectors; check_fetch.go reads the extender and share-plugin by URL or through the
//     API server's service and pod proxies.
//   - NewCommand wires flags (kubectl's genericclioptions), fetching, building and rendering.
//
// All memory numbers are gpu-mem units as the node publishes them (GiB unless share-plugin
// runs with another --memory-unit); the unit's name travels with each node.
package inspect
