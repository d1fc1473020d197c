// Package inspect implements `kubectl inspect gpushare`: GPU-memory occupancy per card of the
// GPU-sharing nodes, and the pods waiting for gpu-mem with the scheduler's last reason.
//
// The package is split the way the old tool's users consume it:
//   - Build and BuildPending are pure: API objects in, a Model out (no client, no I/O).
//   - RenderSummary, RenderDetails, RenderPending, JSON and YAML write a Model to an io.Writer.
//     The text forms keep the column names and cluster line of the old
//     kubectl-inspect-gpushare so scripts that parse them keep working.
//   - fetch.go is the only code that talks to the API server (a kubernetes.Interface), always
//     with field selectors.
//   - NewCommand wires flags (kubectl's genericclioptions), fetching, Build and rendering.
//
// All memory numbers are gpu-mem units as the node publishes them (GiB unless share-plugin
// runs with another --memory-unit); the unit's name travels with each node.
package inspect
