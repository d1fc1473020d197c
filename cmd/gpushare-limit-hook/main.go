// Command gpushare-limit-hook is the OCI createRuntime hook that share-plugin's per-allocation
// CDI spec names on nodes labelled gpushare.io/isolation=limit: it gives the container's
// cgroup a hard GPU-memory limit per card, set by the driver. See pkg/limithook and
// docs/share-plugin.md.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gpushare/gpushare/pkg/limithook"
)

// timeout bounds the hook: the runtime waits for it before the container may start.
const timeout = 30 * time.Second

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := limithook.Exec(ctx, os.Args[1:], os.Stdin)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpushare-limit-hook: %v\n", err)
		os.Exit(1)
	}
}
