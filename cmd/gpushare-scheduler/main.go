// Command gpushare-scheduler is kube-scheduler with the GPUShare framework plugin
// (pkg/schedulerplugin) registered out of tree. It takes kube-scheduler's flags and
// configuration; see docs/scheduler-plugin.md.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gpushare/gpushare/pkg/schedulerplugin"
)

func main() {
	// The ledger's gauges join kube-scheduler's own on its /metrics.
	plugin := schedulerplugin.Factory(schedulerplugin.Options{Registerer: legacyregistry.Registerer()})
	cmd := app.NewSchedulerCommand(app.WithPlugin(schedulerplugin.Name, plugin))
	os.Exit(cli.Run(cmd))
}
