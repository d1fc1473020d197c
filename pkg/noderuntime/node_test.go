package noderuntime

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

const testNode = "node-a"

// testConfig is a node of two simulated T4s in GiB units, with a fake API holding the node
// labelled with labels.
func testConfig(t *testing.T, labels map[string]string) (Config, *gpunvml.Simulator) {
	t.Helper()
	sim, nv, err := gpunvml.Simulate(testNode, "t4:2")
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: labels}})
	return Config{Name: testNode, Client: client, NVML: nv, Simulated: true, Unit: gpushare.GiB,
		Clock: clocktesting.NewFakeClock(time.Now()), HealthRecovery: time.Hour}, sim
}

// TestNewValidates: what New cannot work without, and a watchdog setting it would run
// blind with, is refused before NVML is read.
func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "no name", change: func(c *Config) { c.Name = "" }, wantErr: "node name is empty"},
		{name: "no unit", change: func(c *Config) { c.Unit = gpushare.Unit{} }, wantErr: "memory unit is not set"},
		{name: "no client", change: func(c *Config) { c.Client = nil }, wantErr: "API client are required"},
		{name: "negative interval", change: func(c *Config) { c.Usage.Interval = -time.Second }, wantErr: "usage interval -1s is negative"},
		{name: "bad threshold", change: func(c *Config) { c.Usage.OverGrant = watchdog.OverGrant{Threshold: -1} }, wantErr: "threshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t, nil)
			tc.change(&cfg)
			n, err := New(cfg)
			if tc.wantErr == "" {
				if err != nil || len(n.Cards()) != 2 || n.Pods() == nil || n.Recorder() == nil {
					t.Fatalf("New = %v, %v; want two cards, a pod informer and a recorder", n, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New: %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestWatchHealth: an XID from NVML reaches the fault log before the health tracker marks
// the card unhealthy.
func TestWatchHealth(t *testing.T) {
	cfg, sim := testConfig(t, nil)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); n.WatchHealth(ctx) }()
	uuid := n.Cards()[1].UUID
	changed := n.Health().Changed()
	// The watch may not be listening yet: inject until the card turns unhealthy.
	for n.Health().Healthy(uuid) {
		if err := sim.InjectXID(1, 79); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("card 1 never turned unhealthy")
		}
	}
	if got := n.Faults().Snapshot()[uuid]; got != 79 {
		t.Errorf("fault log of card 1 = %d, want XID 79", got)
	}
	if !n.Health().Healthy(n.Cards()[0].UUID) {
		t.Errorf("card 0 unhealthy after a fault of card 1")
	}
	cancel()
	<-done
}

// TestCheckBackend: the node's back-end label decides which back end may serve it.
func TestCheckBackend(t *testing.T) {
	for _, tc := range []struct {
		labels  map[string]string
		want    gpushare.Backend
		wantErr bool
	}{
		{labels: nil, want: gpushare.BackendDevicePlugin},
		{labels: nil, want: gpushare.BackendDRA, wantErr: true},
		{labels: map[string]string{gpushare.LabelBackend: "dra"}, want: gpushare.BackendDRA},
		{labels: map[string]string{gpushare.LabelBackend: "dra"}, want: gpushare.BackendDevicePlugin, wantErr: true},
		{labels: map[string]string{gpushare.LabelBackend: "x"}, want: gpushare.BackendDRA, wantErr: true},
	} {
		cfg, _ := testConfig(t, tc.labels)
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		node, err := n.CheckBackend(context.Background(), tc.want)
		if (err != nil) != tc.wantErr || (err == nil) != (node != nil) {
			t.Errorf("labels %v, back end %s: node %v, error %v; want error %v", tc.labels, tc.want, node, err, tc.wantErr)
		}
	}
}
