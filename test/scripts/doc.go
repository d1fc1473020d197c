// Package scripts checks the shell scripts of hack/ and deploy/, mostly without running them:
// the programs the project builds are reached through hack/lib/bins.sh's tool_path only, never
// from PATH, and the README names every host package the scripts need. One script runs:
// hack/gpu-acceptance.sh, as on a machine without a GPU, where it SKIPs every check.
package scripts
