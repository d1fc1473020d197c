package deviceplugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestPlaceHonoursCardChoice: for a pod without a record, share-plugin's own card choice
// keeps to the cards the pod's card annotations allow, in the order of its card-policy.
func TestPlaceHonoursCardChoice(t *testing.T) {
	e := newTestEnv(t, "t4,a100-40gb") // card 0: Tesla T4, 14 units; card 1: NVIDIA A100-SXM4-40GB, 40 units
	tests := []struct {
		name    string
		ann     map[string]string
		want    gpushare.CardUnits
		wantErr string
	}{
		{name: "no annotations: best fit", want: gpushare.CardUnits{0: 4}},
		{name: "use-gputype A100", ann: map[string]string{gpushare.AnnotationHAMiUseGPUType: "a100"}, want: gpushare.CardUnits{1: 4}},
		{name: "card-policy spread", ann: map[string]string{gpushare.AnnotationCardPolicy: "spread"}, want: gpushare.CardUnits{1: 4}},
		{
			name: "spread among T4s", want: gpushare.CardUnits{0: 4},
			ann: map[string]string{gpushare.AnnotationCardPolicy: "spread", gpushare.AnnotationHAMiAvoidGPUType: "A100"},
		},
		{
			name: "no card of the type", ann: map[string]string{gpushare.AnnotationUseGPUType: "H100"},
			wantErr: "its card annotations allow no card of this node (it wants a card of type H100)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod("p", 1, 1, []ctr{{name: "main", units: 4}}, gpushare.PodAllocation{})
			pod.Annotations = tc.ann
			c, ok := nextContainer(pod, testNode, gpushare.DefaultResources(), func(*corev1.Pod) map[gpushare.ContainerRef]bool { return nil })
			if !ok {
				t.Fatal("no candidate container")
			}
			got, err := e.plugin.place(c, gpushare.CardUnits{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got.For(gpushare.ContainerRef{})); d != "" {
				t.Errorf("cards (-want,+got):\n%s", d)
			}
		})
	}
}
