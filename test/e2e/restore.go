//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// baseline is what every case must leave as it found it: the nodes, the real node's gpushare
// labels and allocatable memory, the e2e namespaces still active, and the components serving.
type baseline struct {
	Nodes          []string
	RealNodeLabels map[string]string
	RealNodeMem    string
	E2ENamespaces  []string
	Serving        []string
}

// takeBaseline reads the baseline; a cluster that cannot be read fails the case before it
// starts.
func takeBaseline(t *testing.T, e *Env) baseline {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := readBaseline(ctx, e)
	if err != nil {
		t.Fatalf("reading the cluster before the case: %v", err)
	}
	return b
}

// checkRestored waits (cleanups such as deletions and restarts settle asynchronously) until
// the cluster is back to before, and fails the case with the difference otherwise.
func checkRestored(t *testing.T, e *Env, before baseline) {
	t.Helper()
	var after, read baseline
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if read, lastErr = readBaseline(ctx, e); lastErr == nil {
			after = read
		}
		return lastErr == nil && cmp.Equal(before, after), nil
	})
	if err != nil {
		t.Errorf("the case left the cluster changed (the next case would depend on it); last read error: %v; (-before,+after):\n%s",
			lastErr, cmp.Diff(before, after))
	}
}

func readBaseline(ctx context.Context, e *Env) (baseline, error) {
	var b baseline
	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return b, fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes.Items {
		b.Nodes = append(b.Nodes, n.Name)
		if n.Name == e.RealNode {
			b.RealNodeLabels = gpushareLabels(n.Labels)
			q := n.Status.Allocatable[gpushare.DefaultMemResource]
			b.RealNodeMem = q.String()
		}
	}
	sort.Strings(b.Nodes)
	nss, err := e.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return b, fmt.Errorf("listing namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "e2e-") && ns.Status.Phase == corev1.NamespaceActive && ns.DeletionTimestamp == nil {
			b.E2ENamespaces = append(b.E2ENamespaces, ns.Name)
		}
	}
	sort.Strings(b.E2ENamespaces)
	b.Serving = serving(ctx, e)
	return b, nil
}

// gpushareLabels are the labels of the gpushare protocol's prefixes and the node label the
// extender serves.
func gpushareLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if strings.HasPrefix(k, "gpushare.io/") || k == gpushare.NodeLabelKey {
			out[k] = v
		}
	}
	return out
}

// serving names the components that answer now: the extender's /readyz, and on a real node
// share-plugin with kubelet reading its devices.
func serving(ctx context.Context, e *Env) []string {
	var up []string
	if req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ExtenderDiagnosticsURL+"/readyz", nil); err == nil {
		if resp, err := e.ExtenderHTTP.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				up = append(up, "extender")
			}
		}
	}
	if e.RealNode != "" && listAndWatchStreams(ctx, e.SharePluginURL) > 0 {
		up = append(up, "share-plugin")
	}
	return up
}
