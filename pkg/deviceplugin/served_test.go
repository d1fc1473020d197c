package deviceplugin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestServedEndpointAndMetric(t *testing.T) {
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, []ctr{{name: "m", units: 4}}, app(gpushare.CardUnits{0: 4})),
		// s's init container (3) runs before its app container (2), both on card 1: the pod
		// holds max(2, 3) = 3 there, not 5.
		makePod("s", 2, 11, []ctr{{name: "setup", units: 3, init: true}, {name: "m", units: 2}},
			gpushare.PodAllocation{Init: gpushare.Allocation{0: {1: 3}}, App: gpushare.Allocation{0: {1: 2}}}),
		makePod("d", 3, 12, []ctr{{name: "m", units: 1}}, app(gpushare.CardUnits{0: 1})),
	)
	for _, n := range []int{4, 3, 2, 1} {
		if _, err := e.allocate(t, n); err != nil {
			t.Fatalf("Allocate(%d): %v", n, err)
		}
	}
	// d finishes: what it was served no longer counts.
	e.setPhase(t, "d", corev1.PodSucceeded)

	srv := httptest.NewServer(e.plugin.Handler())
	defer srv.Close()
	want := `{"node":"gpu-node","cards":[` +
		`{"index":0,"uuid":"` + uuid(0) + `","totalUnits":14,"servedUnits":4},` +
		`{"index":1,"uuid":"` + uuid(1) + `","totalUnits":14,"servedUnits":3}],` +
		`"containers":[` +
		`{"namespace":"default","name":"a","uid":"uid-a","container":"app/0","cards":{"0":4}},` +
		`{"namespace":"default","name":"s","uid":"uid-s","container":"app/0","cards":{"1":2}},` +
		`{"namespace":"default","name":"s","uid":"uid-s","container":"init/0","cards":{"1":3}}]}` + "\n"
	if diff := cmp.Diff(want, get(t, srv.URL+"/served", http.StatusOK)); diff != "" {
		t.Errorf("/served (-want,+got):\n%s", diff)
	}
	body := get(t, srv.URL+"/metrics", http.StatusOK)
	for _, line := range []string{
		`gpushare_plugin_card_served_units{card="0",uuid="` + uuid(0) + `"} 4`,
		`gpushare_plugin_card_served_units{card="1",uuid="` + uuid(1) + `"} 3`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

// setPhase sets a pod's phase in the API server and waits for the informer to show it.
func (e *testEnv) setPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	ctx := context.Background()
	pod, err := e.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	if _, err := e.client.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		for _, p := range e.plugin.podsOnNode() {
			if p.Name == name && p.Status.Phase == phase {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("informer never showed pod %s %s", name, phase)
}
