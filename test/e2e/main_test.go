//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// env is the cluster every test runs against. TestMain sets it once before any test runs;
// tests only read it.
var env *Env

// TestMain builds the binaries and images, starts one local cluster in its own state dir
// (_output/e2e), runs the tests and stops the cluster in every case: normal exit, failure,
// SIGINT/SIGTERM, and (through a reaper process) a panic, a -timeout or SIGKILL.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cfg, err := configFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := prepare(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: preparing:", err)
		return 1
	}
	reaper, err := startReaper(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer reaper.stop()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the cluster\n", s)
		clusterDown(cfg)
		os.Exit(130)
	}()
	defer clusterDown(cfg)

	env, err = clusterUp(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the cluster:", err)
		dumpLogs(cfg)
		return 1
	}
	code := m.Run()
	if code != 0 {
		dumpLogs(cfg)
	}
	return code
}
