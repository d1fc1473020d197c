// Package scripts checks the shell scripts of hack/ and deploy/ without running them: the
// programs the project builds are reached through hack/lib/bins.sh's tool_path only, never
// from PATH, and the README names every host package the scripts need.
package scripts
