// Command gpushare-probe measures, inside a container, the isolation its node gives it: the
// cards it reaches, the memory the CUDA driver reports, how much it can really allocate
// (stepwise, bounded to its grant and two units, every block freed), whether it runs through
// MPS, and a verdict against what the node's isolation label promises. It prints a human
// line and a JSON result line, and exits 0 (enforced), 1 (NOT enforced) or 2 (cannot verify,
// or misused). `kubectl inspect gpushare --verify` runs it in a pod per node. See
// pkg/probe and docs/isolation.md.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/probe"
	"github.com/gpushare/gpushare/pkg/probe/cuda"
	"github.com/gpushare/gpushare/pkg/version"
)

// A CUDA context is current on one OS thread: main's goroutine stays on its thread.
func init() { runtime.LockOSThread() }

// exitMisused is the status of a command line the probe cannot run with: like cannot verify.
const exitMisused = 2

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("gpushare-probe", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	isolation := fs.String("isolation", "", "the node's "+gpushare.LabelIsolation+" label (empty: none)")
	enforced := fs.String("isolation-enforced", "", "the node's "+gpushare.LabelIsolationEnforced+" label, which wins where set")
	unit := fs.String("unit", "GiB", "the node's gpu-mem unit: GiB, MiB or a multiple such as 256MiB")
	expect := fs.Int("expect-cards", 1, "cards this container was granted: 0 for a container that requests no gpu-mem, which must see none")
	lib := fs.String("libcuda", cuda.DefaultLibrary, "the CUDA driver library, a name for the dynamic loader or a path")
	showVersion := fs.Bool("version", false, "print the version and exit")
	flagenv.Bind(fs, flagenv.Except("version"))
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "gpushare-probe: %v\n", err)
		return exitMisused
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Version)
		return 0
	}
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintf(stderr, "gpushare-probe: %v\n", err)
		return exitMisused
	}
	cfg, err := config(*isolation, *enforced, *unit, *expect)
	if err != nil {
		fmt.Fprintf(stderr, "gpushare-probe: %v\n", err)
		return exitMisused
	}
	r := probe.Run(cfg, probe.Look(os.LookupEnv, os.DirFS("/")), func() (probe.Driver, error) { return cuda.Open(*lib) })
	line, err := r.JSON()
	if err != nil {
		fmt.Fprintf(stderr, "gpushare-probe: %v\n", err)
		return exitMisused
	}
	fmt.Fprintln(stdout, r.Line())
	fmt.Fprintln(stdout, line)
	return r.Verdict.ExitCode()
}

// config checks the flags: valid label values, a unit ParseUnit accepts, no negative count.
func config(isolation, enforced, unit string, expect int) (probe.Config, error) {
	promise, err := probe.PromiseOf(isolation, enforced)
	if err != nil {
		return probe.Config{}, err
	}
	u, err := gpushare.ParseUnit(unit)
	if err != nil {
		return probe.Config{}, err
	}
	if expect < 0 {
		return probe.Config{}, fmt.Errorf("--expect-cards %d: want 0 or more", expect)
	}
	return probe.Config{Promise: promise, Unit: u, ExpectCards: expect}, nil
}
