//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkSMUtilization: with container c0 of pod hog in ns (4 GiB units of the simulated
// 15079 MiB T4) listed at smUtil 50, share-plugin exports its SM utilisation, 0.5, and its
// utilisation per share, 0.5 ÷ (4096/15079). Skipped on a node labelled
// gpushare.io/isolation=mps, where no utilisation is exported.
func checkSMUtilization(ctx context.Context, t *testing.T, e *Env, ns string) {
	t.Helper()
	node, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[gpushare.LabelIsolation] == string(gpushare.IsolationMPS) {
		t.Log("node labelled mps: no SM utilisation is exported there")
		return
	}
	ratio := fmt.Sprintf(`gpushare_container_gpu_sm_utilization_ratio{card="0",container="c0",namespace=%q,`, ns)
	perShare := fmt.Sprintf(`gpushare_container_gpu_sm_utilization_per_share_ratio{card="0",container="c0",namespace=%q,`, ns)
	var metrics string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		metrics = scrape(t, e.SharePluginURL+"/metrics")
		return metricValue(metrics, ratio) == 0.5, nil
	})
	if err != nil {
		t.Fatalf("no SM utilisation of 0.5 for the container: %v\n%s", err, grepLines(metrics, "gpushare_container_gpu_sm"))
	}
	if got, want := metricValue(metrics, perShare), 0.5*15079/4096; math.Abs(got-want) > 1e-9 {
		t.Errorf("SM utilisation per share %v, want %v", got, want)
	}
}
