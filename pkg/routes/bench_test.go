package routes_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// BenchmarkFilter5000Nodes: one filter call (NodeNames form, as with nodeCacheCapable) for a
// 14-unit pod against 5000 nodes × 8 cards of 16 units holding 40,000 placed pods, through
// the HTTP handler: decode, per-card fit on every node, failure reasons, encode.
// Card j of node i holds a pod of ((7i+3j) mod 13)+1 units, so most nodes have a card with
// 14 free and the rest fail with a per-card reason.
func BenchmarkFilter5000Nodes(b *testing.B) {
	f, names := bigCluster(b)
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: ct.Pod("incoming", 14), NodeNames: &names})
	if err != nil {
		b.Fatal(err)
	}
	checkSplit(b, f, body, len(names))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		filterOnce(b, f, body)
	}
}

// BenchmarkFilter5000NodesCold is BenchmarkFilter5000Nodes with the pod size cycling
// between 14 and 15 units, so no node can answer a shortfall from its memo of the last
// one: the cost of a pod size the nodes have not seen since they last changed.
func BenchmarkFilter5000NodesCold(b *testing.B) {
	f, names := bigCluster(b)
	var bodies [][]byte
	for _, units := range []int64{14, 15} {
		body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: ct.Pod("incoming", units), NodeNames: &names})
		if err != nil {
			b.Fatal(err)
		}
		checkSplit(b, f, body, len(names))
		bodies = append(bodies, body)
	}
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		filterOnce(b, f, bodies[i%len(bodies)])
		i++
	}
}

func filterOnce(b *testing.B, f *fixture, body []byte) {
	rec := httptest.NewRecorder()
	f.h.Verbs().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/gpushare-scheduler/filter", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		b.Fatalf("status %d", rec.Code)
	}
}

// checkSplit makes sure a filter call splits the nodes between passing and failing.
func checkSplit(b *testing.B, f *fixture, body []byte, nodes int) {
	rec := httptest.NewRecorder()
	f.h.Verbs().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/gpushare-scheduler/filter", bytes.NewReader(body)))
	var res extenderv1.ExtenderFilterResult
	decodeInto(b, rec, &res)
	if res.NodeNames == nil || len(*res.NodeNames)+len(res.FailedNodes) != nodes || len(res.FailedNodes) == 0 {
		b.Fatalf("unexpected filter answer: %s", rec.Body.String()[:200])
	}
	b.Logf("%d nodes pass, %d fail", len(*res.NodeNames), len(res.FailedNodes))
}

// bigCluster: 5000 nodes × 8 cards of 16 units; card j of node i holds one pod of
// ((7i+3j) mod 13)+1 units (40,000 pods).
func bigCluster(b *testing.B) (*fixture, []string) {
	const nodes, cardsPerNode = 5000, 8
	objs := make([]runtime.Object, 0, nodes*(cardsPerNode+1))
	names := make([]string, nodes)
	sizes := make([]int64, cardsPerNode)
	for j := range sizes {
		sizes[j] = 16
	}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%04d", i)
		names[i] = name
		objs = append(objs, ct.Node(name, sizes...))
		for j := 0; j < cardsPerNode; j++ {
			units := int64((7*i+3*j)%13) + 1
			objs = append(objs, ct.Placed(ct.Pod(fmt.Sprintf("p-%04d-%d", i, j), units), name, gpushare.CardUnits{j: units}))
		}
	}
	return newFixture(b, objs...), names
}
