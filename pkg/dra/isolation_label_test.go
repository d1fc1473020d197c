package dra

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// runtimeAccepts stands for preflight.IsolationBlocker on a runtime that honours an
// unprivileged pod's own NVIDIA_VISIBLE_DEVICES.
var runtimeAccepts = errors.New("gpushare.io/env-device-requests=accepted")

// TestIsolationLabel: the node's gpushare.io/isolation-enforced says what the DRA back end
// enforces for its isolation label, as prepare decides.
func TestIsolationLabel(t *testing.T) {
	tooOld := errors.New("driver too old")
	tests := []struct {
		name        string
		labels      map[string]string
		unsupported error
		blocked     error  // the runtime's verdict on a pod's own device requests
		want        string // "" : no label
	}{
		{name: "no isolation label", labels: nil},
		{name: "a stale label goes", labels: map[string]string{gpushare.LabelIsolationEnforced: "limit"}},
		{name: "none", labels: map[string]string{gpushare.LabelIsolation: "none"}, want: "none"},
		{name: "limit", labels: map[string]string{gpushare.LabelIsolation: "limit"}, want: "limit"},
		{name: "limit the node cannot enforce", labels: map[string]string{gpushare.LabelIsolation: "limit"}, unsupported: tooOld, want: "none"},
		{name: "limit where the runtime honours a pod's own device requests", labels: map[string]string{gpushare.LabelIsolation: "limit"}, blocked: runtimeAccepts, want: "none"},
		{name: "none where the runtime honours a pod's own device requests", labels: map[string]string{gpushare.LabelIsolation: "none"}, blocked: runtimeAccepts, want: "none"},
		{name: "mps is not run", labels: map[string]string{gpushare.LabelIsolation: "mps"}, want: "none"},
		{name: "a bad label", labels: map[string]string{gpushare.LabelIsolation: "x", gpushare.LabelIsolationEnforced: "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: tt.labels}}
			client := fake.NewClientset(node)
			l := isolationLabel{client: client, node: testNode, enforced: enforcedIsolation(tt.unsupported, func() error { return tt.blocked })}
			l.publish(ctx, node)
			if got := enforcedLabel(ctx, t, client); got != tt.want {
				t.Errorf("%s = %q, want %q", gpushare.LabelIsolationEnforced, got, tt.want)
			}
		})
	}
}

// TestIsolationLabelResync: a label changed while no claim is prepared is published at the
// next resync.
func TestIsolationLabelResync(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})
	clk := clocktesting.NewFakeClock(time.Now())
	l := isolationLabel{client: client, node: testNode, enforced: enforcedIsolation(nil, nil)}
	done := make(chan struct{})
	go func() { defer close(done); l.resync(ctx, clk, time.Minute) }()

	node, err := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels = map[string]string{gpushare.LabelIsolation: "limit"}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		if clk.HasWaiters() {
			clk.Step(time.Minute)
		}
		return enforcedLabel(ctx, t, client) == "limit", nil
	})
	if err != nil {
		t.Fatalf("%s never became limit after a resync", gpushare.LabelIsolationEnforced)
	}
	cancel()
	<-done
}

func enforcedLabel(ctx context.Context, t *testing.T, client *fake.Clientset) string {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[gpushare.LabelIsolationEnforced]
}
