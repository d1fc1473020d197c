// Command kubectl-inspect-gpushare is the kubectl plugin `kubectl inspect gpushare`: GPU
// memory per card on GPU-sharing nodes, why gpu-mem pods are pending, and (--verify) whether
// each node isolates its pods as its labels promise. See docs/inspect.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/inspect"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	err := newCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	klog.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		stop()
		// --check's and --verify's statuses: 1 disagreement or NOT enforced, 2 could not
		// check or verify (inspect.ExitCode).
		os.Exit(inspect.ExitCode(err))
	}
}

// newCommand is inspect's command with its own flags (-d, -o, --pending, --mem-resource,
// --count-resource) bound to GPUSHARE_<FLAG> (internal/flagenv), read before it runs.
// kubectl's connection flags (--kubeconfig, --context, -n, …) are persistent flags, not in
// cmd.Flags() when Bind runs: they keep kubectl's rules (KUBECONFIG). So does klog's -v.
func newCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := inspect.NewCommand(streams)
	flagenv.Bind(cmd.Flags())
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := flagenv.Apply(cmd.Flags()); err != nil {
			return err
		}
		return run(cmd, args)
	}
	// Only -v of klog's flags, as kubectl offers it; the rest would clutter -h.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	cmd.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))
	return cmd
}
