// Package imports holds the import rules of the layers below share-plugin, checked on the
// packages `go list` reports (a test, so `go test ./...` and `make lint` run it):
//
//   - the two back ends, pkg/deviceplugin and pkg/dra, never depend on each other, directly
//     or through another package, tests included;
//   - the node layer below them, pkg/nodecards, pkg/noderuntime and pkg/mps, depends on neither;
//   - only pkg/nvml imports github.com/NVIDIA/go-nvml (its own files and tests; every other
//     package, tests included, reaches NVML through pkg/nvml).
//
// A broken rule is reported with the chain of imports that breaks it.
package imports
