// Package docs checks the user documentation against the repository: each pinned version
// (hack/build-k8s.sh, hack/tools.sh, the tool modules under hack/tools) is written once, in
// the table of docs/local-cluster.md, and the guides point at it; docs/README.md lists every
// document; every relative link of README.md, docs/ and deploy/ leads to a file and heading
// that exist; and every docs/ path that code, scripts and manifests name exists.
package docs
