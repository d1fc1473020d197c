// Package version carries the build version, set with -ldflags at link time.
package version

// Version is the git describe of the build ("dev" for go run / go test).
var Version = "dev"
