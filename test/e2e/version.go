//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// CaseControlPlaneVersion: the API server and the real node's kubelet run the Kubernetes
// release the suite was asked for (K8S_VERSION, read by hack/build-k8s.sh, which names its
// bin folder bin-<version>), so a run with K8S_VERSION=1.35.4 tests that release and not
// whatever binaries happened to be cached.
func CaseControlPlaneVersion(t *testing.T, e *Env) {
	dir := filepath.Base(e.cfg.k8sBin)
	want, ok := strings.CutPrefix(dir, "bin-")
	if !ok {
		t.Skipf("binaries from %s (GPUSHARE_K8S_BIN?): no version in the folder name", e.cfg.k8sBin)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.Rest)
	if err != nil {
		t.Fatalf("building discovery client: %v", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatalf("reading the API server version: %v", err)
	}
	if v.GitVersion != want {
		t.Errorf("kube-apiserver reports %s, want %s (from %s)", v.GitVersion, want, e.cfg.k8sBin)
	}
	t.Logf("kube-apiserver %s", v.GitVersion)
	if e.RealNode == "" {
		return
	}
	ctx := testContext(t, time.Minute)
	n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading node %s: %v", e.RealNode, err)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != want {
		t.Errorf("kubelet on %s reports %s, want %s", e.RealNode, got, want)
	}
}
