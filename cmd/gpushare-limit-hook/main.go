// Command gpushare-limit-hook is the OCI createRuntime hook that share-plugin's per-allocation
// CDI spec names on nodes labelled gpushare.io/isolation=limit: it gives the container's
// cgroup, and its pod's, a soft and a hard GPU-memory limit per card, set by the driver. `gpushare-limit-hook install
// DIR` copies it into DIR on the host (the share-plugin DaemonSet's init container). See
// pkg/limithook and docs/share-plugin.md.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gpushare/gpushare/pkg/limithook"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "gpushare-limit-hook: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) == 3 && os.Args[1] == "install" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		path, err := limithook.Install(self, os.Args[2])
		if err == nil {
			fmt.Println("installed", path)
		}
		return err
	}
	// Exec bounds itself by its --deadline, shorter than the runtime's timeout on the hook
	// (limithook.DefaultDeadline), and leaves a failure record in --failure-dir.
	return limithook.Exec(context.Background(), os.Args[1:], os.Stdin)
}
