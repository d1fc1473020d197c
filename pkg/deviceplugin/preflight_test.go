package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestPublishPreflight: the node label follows the runtime configuration file as it
// changes; the Warning event comes once per verdict where tenants can widen their cards
// (accepted, or a file that does not parse); the metric marks the current state. Without a
// configured path nothing is read or labelled.
func TestPublishPreflight(t *testing.T) {
	e := newTestEnv(t, "t4")
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "config.toml")
	publish := func() {
		t.Helper()
		if err := e.plugin.publishNode(ctx); err != nil {
			t.Fatal(err)
		}
	}
	label := func() (string, bool) {
		t.Helper()
		node, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := node.Labels[gpushare.LabelEnvDeviceRequests]
		return v, ok
	}

	publish()
	if v, ok := label(); ok {
		t.Fatalf("labelled %s=%s without a configured path", gpushare.LabelEnvDeviceRequests, v)
	}
	e.plugin.cfg.NVIDIARuntimeConfig = path
	steps := []struct {
		name      string
		file      string // "-": no file
		want      gpushare.EnvDeviceRequests
		wantEvent bool
	}{
		{"no file", "-", gpushare.EnvDeviceRequestsUnknown, false},
		{"toolkit installed with its defaults", "[nvidia-container-runtime]\nmode = \"auto\"\n", gpushare.EnvDeviceRequestsAccepted, true},
		{"unchanged: no second event", "[nvidia-container-runtime]\nmode = \"auto\"\n", gpushare.EnvDeviceRequestsAccepted, false},
		{"set to false", "accept-nvidia-visible-devices-envvar-when-unprivileged = false\n", gpushare.EnvDeviceRequestsRefused, false},
		{"malformed", "accept-nvidia-visible-devices-envvar-when-unprivileged = maybe\n", gpushare.EnvDeviceRequestsUnknown, true},
	}
	for _, s := range steps {
		if s.file == "-" {
			_ = os.Remove(path)
		} else if err := os.WriteFile(path, []byte(s.file), 0o644); err != nil {
			t.Fatal(err)
		}
		publish()
		if v, _ := label(); v != string(s.want) {
			t.Errorf("%s: label %q, want %q", s.name, v, s.want)
		}
		var warned []string
		for _, ev := range e.drainEvents() {
			if strings.Contains(ev, gpushare.EventEnvDeviceRequestsAccepted) {
				warned = append(warned, ev)
			}
		}
		if (len(warned) == 1) != s.wantEvent || len(warned) > 1 {
			t.Errorf("%s: events %q, want one: %v", s.name, warned, s.wantEvent)
		}
		for _, ev := range warned {
			if !strings.HasPrefix(ev, "Warning ") || !strings.Contains(ev, path) || !strings.Contains(ev, "accept-nvidia-visible-devices-envvar-when-unprivileged = false") {
				t.Errorf("%s: event %q, want a Warning naming the file and the setting", s.name, ev)
			}
		}
		b, err := testutil.CollectAndFormat(e.plugin.preflight, expfmt.TypeTextPlain, "gpushare_node_env_device_requests")
		if err != nil {
			t.Fatal(err)
		}
		if want := `gpushare_node_env_device_requests{node="` + testNode + `",state="` + string(s.want) + `"} 1`; !strings.Contains(string(b), want) {
			t.Errorf("%s: metrics lack %s:\n%s", s.name, want, b)
		}
	}
	e.client.ClearActions()
	publish()
	if n := countPatches(e); n != 0 {
		t.Errorf("publishNode with an unchanged verdict sent %d patches, want 0", n)
	}
}
