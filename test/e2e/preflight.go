//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseNodePreflight: share-plugin on the real node labels it from the NVIDIA runtime
// configuration it is pointed at: unknown without a file, accepted with the toolkit's
// default (with a Warning event on the node), refused once the key is false; kubectl
// inspect gpushare -d shows each. The node, labelled gpushare.io/isolation=mps meanwhile,
// enforces mps only with the last: elsewhere a container asking for no memory could take
// every card through its own NVIDIA_VISIBLE_DEVICES, and isolation-enforced says none.
func CaseNodePreflight(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "share-plugin", "kubectl-inspect-gpushare")
	ctx := testContext(t, 4*time.Minute)
	path := filepath.Join(e.cfg.state, "nvidia-container-runtime.toml")
	t.Cleanup(func() { _ = os.Remove(path) })
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationMPS))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		labelNode(ctx, t, e, e.RealNode, "")
		setNodeLabel(ctx, t, e, e.RealNode, gpushare.LabelIsolationEnforced, "")
	})
	steps := []struct {
		file     string // "": none
		want     gpushare.EnvDeviceRequests
		enforced gpushare.Isolation
	}{
		{"", gpushare.EnvDeviceRequestsUnknown, gpushare.IsolationNone},
		{"[nvidia-container-runtime]\nmode = \"auto\"\n", gpushare.EnvDeviceRequestsAccepted, gpushare.IsolationNone},
		{"accept-nvidia-visible-devices-envvar-when-unprivileged = false\n", gpushare.EnvDeviceRequestsRefused, gpushare.IsolationMPS},
	}
	for _, s := range steps {
		_ = os.Remove(path)
		if s.file != "" {
			if err := os.WriteFile(path, []byte(s.file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		restartSharePlugin(ctx, t, e, "t4:1", "GPUSHARE_NVIDIA_RUNTIME_CONFIG="+path)
		var got, enforced string
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
			n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got, enforced = n.Labels[gpushare.LabelEnvDeviceRequests], n.Labels[gpushare.LabelIsolationEnforced]
			return got == string(s.want) && enforced == string(s.enforced), nil
		})
		if err != nil {
			t.Fatalf("node labels %s=%q, %s=%q; want %q, %q: %v", gpushare.LabelEnvDeviceRequests, got,
				gpushare.LabelIsolationEnforced, enforced, s.want, s.enforced, err)
		}
		if out := kubectlPlugin(t, e, "inspect", "gpushare", "-d", e.RealNode); !strings.Contains(out, "ENV DEVICE REQUESTS:  "+string(s.want)) {
			t.Errorf("kubectl inspect gpushare -d does not show %s:\n%s", s.want, out)
		}
		if s.want == gpushare.EnvDeviceRequestsAccepted {
			var events string
			err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
				events = podEvents(e, "default", e.RealNode)
				return strings.Contains(events, gpushare.EventEnvDeviceRequestsAccepted), nil
			})
			if err != nil || !strings.Contains(events, path) {
				t.Errorf("no Warning %s naming %s on the node: %v\n%s", gpushare.EventEnvDeviceRequestsAccepted, path, err, events)
			}
		}
	}
}
