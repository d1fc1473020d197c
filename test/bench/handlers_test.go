package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/internal/bench/scale"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
)

// shapes are the pods benchmarked: the common single-card pod, one that fits on few cards
// (so filter rejects many nodes and builds the failure map), and a two-card pod.
var shapes = []struct {
	name  string
	shape scale.PodShape
}{
	{"1card-4u", scale.PodShape{Units: 4, Cards: 1}},
	{"1card-14u", scale.PodShape{Units: 14, Cards: 1}},
	{"2cards-8u", scale.PodShape{Units: 16, Cards: 2}},
}

func (c *cluster) pod(s scale.PodShape) *corev1.Pod {
	p := c.objs.Pod("bench", 0, s)
	p.UID = types.UID("uid-bench")
	return p
}

// argsBody is the JSON body kube-scheduler sends a nodeCacheCapable extender.
func (c *cluster) argsBody(b *testing.B, s scale.PodShape) []byte {
	b.Helper()
	names := c.names
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: c.pod(s), NodeNames: &names})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func (c *cluster) serve(b *testing.B, verb string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, routes.Prefix+"/"+verb, bytes.NewReader(body))
	w := httptest.NewRecorder()
	c.handler.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("%s: HTTP %d: %s", verb, w.Code, w.Body.String())
	}
	return w
}

// BenchmarkFilterHandler is one filter call with 5000 node names, JSON in and out: the
// extender's share of the HTTP figure (target: ≤ 2 ms).
func BenchmarkFilterHandler(b *testing.B) {
	c := getCluster(b)
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			body := c.argsBody(b, s.shape)
			var res extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(c.serve(b, "filter", body).Body.Bytes(), &res); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU(b)
			for b.Loop() {
				c.serve(b, "filter", body)
			}
			cpu.report(b)
			b.ReportMetric(float64(len(*res.NodeNames)), "passed-nodes")
		})
	}
}

// BenchmarkPrioritizeHandler is one prioritize call with 5000 node names; scored-nodes is
// the length of the answer (the nodes scored above 0, what kube-scheduler decodes).
func BenchmarkPrioritizeHandler(b *testing.B) {
	c := getCluster(b)
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) { c.benchPrioritize(b, c.argsBody(b, s.shape)) })
	}
}

// benchPrioritize times prioritize calls with body; scored-nodes is the length of the
// answer (the nodes scored above 0, what kube-scheduler decodes).
func (c *cluster) benchPrioritize(b *testing.B, body []byte) {
	var res extenderv1.HostPriorityList
	if err := json.Unmarshal(c.serve(b, "prioritize", body).Body.Bytes(), &res); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU(b)
	for b.Loop() {
		c.serve(b, "prioritize", body)
	}
	cpu.report(b)
	b.ReportMetric(float64(len(res)), "scored-nodes")
}

// BenchmarkCacheFits is the cache work of one filter call without HTTP or JSON: Fits on
// each of the 5000 nodes.
func BenchmarkCacheFits(b *testing.B) {
	c := getCluster(b)
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			req := c.request(b, s.shape)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, n := range c.names {
					_ = c.cache.Fits(n, req, c.policy)
				}
			}
		})
	}
}

// BenchmarkCacheScores is the work of one prioritize call besides HTTP: each node's
// placement scored under its lock (cache.ViewEach with a policy.Scorer), then the scores
// normalized (policy.NormalizeScores).
func BenchmarkCacheScores(b *testing.B) {
	c := getCluster(b)
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			req := c.request(b, s.shape)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU(b)
			for b.Loop() {
				sc := policy.NewScorer(c.policy, req, policy.Host{})
				scores, fits := make([]float64, len(c.names)), make([]bool, len(c.names))
				c.cache.ViewEach(c.names, nil, func(i int, n policy.Node) { scores[i], fits[i] = sc.Score(n) })
				_ = policy.NormalizeScores(scores, fits)
			}
			cpu.report(b)
		})
	}
}

// BenchmarkReserve is the card choice at bind: Reserve on one node (then Finish refused, so
// every iteration sees the same cards).
func BenchmarkReserve(b *testing.B) {
	c := getCluster(b)
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			req := c.request(b, s.shape)
			pod := c.pod(s.shape)
			node := c.fittingNode(b, req)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rsv, err := c.cache.Reserve(b.Context(), node, pod, req, c.policy)
				if err != nil {
					b.Fatal(err)
				}
				c.cache.Finish(rsv, cache.BindRefused)
			}
		})
	}
}

func (c *cluster) request(b *testing.B, s scale.PodShape) gpushare.PodRequest {
	b.Helper()
	req, err := c.objs.Resources.PodRequest(c.pod(s))
	if err != nil {
		b.Fatal(err)
	}
	return req
}

func (c *cluster) fittingNode(b *testing.B, req gpushare.PodRequest) string {
	b.Helper()
	for _, n := range c.names {
		if c.cache.Fits(n, req, c.policy) == nil {
			return n
		}
	}
	b.Fatal(fmt.Sprintf("no node fits %+v", req))
	return ""
}
