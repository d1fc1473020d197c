package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestLeaderLabel: the pod carries the leader label exactly while the last wish says it
// leads, and a label left by an earlier run is removed.
func TestLeaderLabel(t *testing.T) {
	tests := []struct {
		name   string
		stale  bool   // the pod starts labelled
		wishes []bool // in order
		want   bool
	}{
		{name: "leads", wishes: []bool{false, true}, want: true},
		{name: "stale label cleared at start", stale: true, wishes: []bool{false}},
		{name: "lost right after leading", wishes: []bool{false, true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ext-0", Namespace: "kube-system",
				Labels: map[string]string{"app": "x"}}}
			if tc.stale {
				pod.Labels[gpushare.LabelExtenderLeader] = "true"
			}
			client := fake.NewClientset(pod)
			l := newLeaderLabel(client, "kube-system", "ext-0")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopped := make(chan struct{})
			go func() { defer close(stopped); l.run(ctx) }()
			for _, w := range tc.wishes {
				l.set(w)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				p, err := client.CoreV1().Pods("kube-system").Get(ctx, "ext-0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				_, labelled := p.Labels[gpushare.LabelExtenderLeader]
				if labelled == tc.want && len(l.want) == 0 && p.Labels["app"] == "x" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("labels %v, want leader label %v (other labels kept)", p.Labels, tc.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The label may match before run took the last wish, or while it still applies
			// it: once run has returned, every wish taken is applied, and the label must
			// still say the last one.
			cancel()
			<-stopped
			p, err := client.CoreV1().Pods("kube-system").Get(context.Background(), "ext-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, labelled := p.Labels[gpushare.LabelExtenderLeader]; labelled != tc.want {
				t.Errorf("after the last wish was applied: labels %v, want leader label %v", p.Labels, tc.want)
			}
		})
	}
}
