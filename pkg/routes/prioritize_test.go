package routes_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
)

func withCPU(n *corev1.Node, cores int64) *corev1.Node {
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cores, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
	}
	return n
}

func cpuPod(name string, mem int64, cores int64) *corev1.Pod {
	p := ct.Pod(name, mem)
	c := &p.Spec.Containers[0]
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	c.Resources.Requests[corev1.ResourceCPU] = *resource.NewQuantity(cores, resource.DecimalSI)
	return p
}

// Under fgd, a pod without gpu-mem is kept off the node whose CPU the typical gpu pod needs.
func TestPrioritizeFGDKeepsCPUForGPUPods(t *testing.T) {
	// The workload seen: gpu pods of one 16-unit card and 8 cores (pending, unbound).
	// Node "tight" has 10 cores: a 4-core pod there leaves 6 < 8 and strands its free card
	// (ΔF = +16). Node "roomy" has 40 cores: nothing changes there (ΔF = 0).
	f := newFGDFixture(t,
		withCPU(ct.Node("tight", 16), 10), withCPU(ct.Node("roomy", 16), 40),
		cpuPod("g1", 16, 8), cpuPod("g2", 16, 8),
	)
	names := []string{"tight", "roomy"}
	var got extenderv1.HostPriorityList
	ct.Eventually(t, "fgd prefers roomy", func() bool {
		rec := f.do(t, http.MethodPost, "/gpushare-scheduler/prioritize", extenderv1.ExtenderArgs{Pod: cpuPod("web", 0, 4), NodeNames: &names})
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		got = nil
		decodeInto(t, rec, &got)
		return cmp.Equal(extenderv1.HostPriorityList{{Host: "roomy", Score: 10}}, got) // tight: 0, left out
	})
}

// Concurrent prioritize calls of different pods each get their own answer: every call rates
// with its own policy.Scorer (run with -race).
func TestPrioritizeConcurrent(t *testing.T) {
	f := filterFixture(t)
	names := []string{"half", "empty", "nogpu", "unknown"}
	want := map[int64]extenderv1.HostPriorityList{ // per pod size, as in TestPrioritize
		4:  {{Host: "half", Score: 10}},
		10: {{Host: "empty", Score: 10}},
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		size := []int64{4, 10}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := f.do(t, http.MethodPost, "/gpushare-scheduler/prioritize", extenderv1.ExtenderArgs{Pod: ct.Pod("p", size), NodeNames: &names})
			var got extenderv1.HostPriorityList
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil { // not decodeInto: no Fatal off the test goroutine
				t.Errorf("decoding %q: %v", rec.Body.String(), err)
				return
			}
			if d := cmp.Diff(want[size], got); d != "" {
				t.Errorf("%d GiB (-want,+got):\n%s", size, d)
			}
		}()
	}
	wg.Wait()
}
