package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/internal/bench/scale"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
)

// The fgd benchmarks score against the workload of the default trace: the ledger has seen
// one pending pod per pod of the trace (testdata/openb-default-shapes.csv, 151 shapes with
// CPU and memory), and the placed pods are the trace's single-card pods in turn, so they add no
// shape. Cards have 1000 units, the trace's GPU-milli, so every shape is exact.
const (
	fgdCardUnits = 1000
	fgdNodeCPU   = 96000  // millicores: the trace's most common GPU node (8 × G2)
	fgdNodeMem   = 393216 // MiB
)

// traceShape is one line of the shapes file: a pod of cards × milli GPU (0: no gpu-mem), its
// CPU and memory request, and how many pods of the trace have it.
type traceShape struct {
	cards, milli, cpu, mem, pods int64
}

func readTraceShapes() ([]traceShape, error) {
	f, err := os.Open("testdata/openb-default-shapes.csv")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	var out []traceShape
	for line := 0; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if line == 0 {
			continue // header
		}
		var v [5]int64
		for i := range v {
			if v[i], err = strconv.ParseInt(strings.TrimSpace(rec[i]), 10, 64); err != nil {
				return nil, fmt.Errorf("shapes line %d: %w", line, err)
			}
		}
		out = append(out, traceShape{cards: v[0], milli: v[1], cpu: v[2], mem: v[3], pods: v[4]})
	}
}

func (s traceShape) pod(name string) objects.Pod {
	return objects.Pod{Name: name, Namespace: scale.DefaultNamespace, MilliCPU: s.cpu, MemoryMiB: s.mem,
		Units: s.milli * s.cards, Cards: s.cards}
}

var (
	fgdOnce    sync.Once
	fgdShared  *cluster
	fgdInitErr error
)

func getFGDCluster(b *testing.B) *cluster {
	b.Helper()
	fgdOnce.Do(func() { fgdShared, fgdInitErr = newFGDCluster() })
	if fgdInitErr != nil {
		b.Fatal(fgdInitErr)
	}
	return fgdShared
}

// newFGDCluster is numNodes nodes of 8 cards × 1000 units, 96 cores and 384 GiB, with fgd on a
// ledger that tracks the workload. Node j has a pod on each of its first j%9 cards (none to
// all eight; about 20,000 pods), each the next single-card pod of the trace (its pods in the
// shapes file's order, repeated) unless the node's CPU or memory would not hold it: nodes end
// with different cards and hosts, as in a cluster that has run a while.
func newFGDCluster() (*cluster, error) {
	shapes, err := readTraceShapes()
	if err != nil {
		return nil, err
	}
	res := gpushare.DefaultResources()
	objs := scale.DefaultObjects()
	objs.CardUnits = fgdCardUnits
	names := make([]string, numNodes)
	nodes := make([]k8sruntime.Object, numNodes)
	for i := range names {
		names[i] = scale.NodeName(i)
		n, err := objects.Node{
			Name: names[i], Model: "G2", Cards: objs.Cards, CardUnits: fgdCardUnits,
			Unit: gpushare.Unit{MiB: 16}, CardMemoryMiB: 16000, MilliCPU: fgdNodeCPU, MemoryMiB: fgdNodeMem,
			MaxPods: 110, Ready: true,
		}.Build(res)
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	var pods []k8sruntime.Object
	var single []traceShape
	var learnt policy.ShapeCounter // what the ledger will learn, to check the shapes file
	for si, s := range shapes {
		for j := range s.pods {
			p := s.pod(fmt.Sprintf("trace-%d-%d", si, j)).Build(res)
			p.UID = types.UID(p.Name)
			pods = append(pods, p)
			req, err := res.PodRequest(p)
			if err != nil {
				return nil, err
			}
			learnt.Add(req, cache.HostRequest(p), 0)
			if s.cards == 1 {
				single = append(single, s)
			}
		}
	}
	if n := len(learnt.Workload(policy.WorkloadCoverage, policy.WorkloadMaxShapes)); n != 151 {
		return nil, fmt.Errorf("the shapes file gives %d shapes, want the default trace's 151", n)
	}
	var cpu, mem [numNodes]int64
	now := time.Now()
	next := 0
	for k := range numNodes * objs.Cards {
		node, card := k/objs.Cards, k%objs.Cards
		if card >= node%(objs.Cards+1) {
			continue
		}
		s := single[next%len(single)]
		next++
		if cpu[node]+s.cpu > fgdNodeCPU || mem[node]+s.mem > fgdNodeMem {
			continue
		}
		cpu[node] += s.cpu
		mem[node] += s.mem
		p := s.pod(fmt.Sprintf("placed-%d", k)).Build(res)
		p.UID = types.UID(p.Name)
		var a gpushare.PodAllocation
		a.Set(gpushare.ContainerRef{Index: 0}, gpushare.CardUnits{card: s.milli})
		p.Annotations = gpushare.BindAnnotations(a, s.milli, gpushare.CardUnits{card: fgdCardUnits}, gpushare.Unit{}, now)
		p.Spec.NodeName = names[node]
		p.Status.Phase = corev1.PodRunning
		pods = append(pods, p)
	}
	client := fake.NewClientset()
	c, err := startCache(cache.Config{PodClient: client.CoreV1(), Resources: res, TrackWorkload: true}, nodes, pods)
	if err != nil {
		return nil, err
	}
	pol, err := policy.New("fgd")
	if err != nil {
		return nil, err
	}
	h, err := routes.New(routes.Config{Cache: c, Policy: pol, Resources: res, Client: client})
	if err != nil {
		return nil, err
	}
	// Building the cluster leaves some hundred MB of garbage: collect it now, not in the
	// first benchmark's loop.
	runtime.GC()
	return &cluster{objs: objs, names: names, cache: c, policy: pol, handler: h.Verbs()}, nil
}

// fgdPods are the pods of the fgd benchmarks: the trace's most common pod (810 milli of one
// card), a whole card, two whole cards, and a pod without gpu-mem (which fgd scores too).
var fgdPods = []struct {
	name  string
	shape traceShape
}{
	{"1card-810m", traceShape{cards: 1, milli: 810, cpu: 3152, mem: 5600}},
	{"1card-1000m", traceShape{cards: 1, milli: 1000, cpu: 11300, mem: 49152}},
	{"2cards-1000m", traceShape{cards: 2, milli: 1000, cpu: 16000, mem: 65536}},
	{"cpu-only", traceShape{cpu: 12500, mem: 57344}},
}

func (c *cluster) fgdArgsBody(b *testing.B, s traceShape) []byte {
	b.Helper()
	p := s.pod("bench").Build(c.objs.Resources)
	p.UID = "uid-bench"
	names := c.names
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: p, NodeNames: &names})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkPrioritizeHandlerFGD is BenchmarkPrioritizeHandler under fgd with the default
// trace's 151 shapes learned, on nodes whose cards and hosts differ (newFGDCluster); the
// target is ≤ 5 ms per call.
func BenchmarkPrioritizeHandlerFGD(b *testing.B) {
	c := getFGDCluster(b)
	for _, s := range fgdPods {
		b.Run(s.name, func(b *testing.B) { c.benchPrioritize(b, c.fgdArgsBody(b, s.shape)) })
	}
}

// BenchmarkCacheScoresFGD is BenchmarkCacheScores on newFGDCluster: the scoring of one
// prioritize call under fgd, without HTTP and JSON.
func BenchmarkCacheScoresFGD(b *testing.B) {
	c := getFGDCluster(b)
	for _, s := range fgdPods {
		b.Run(s.name, func(b *testing.B) {
			p := s.shape.pod("bench").Build(c.objs.Resources)
			req, err := c.objs.Resources.PodRequest(p)
			if err != nil {
				b.Fatal(err)
			}
			host := cache.HostRequest(p)
			fitting := 0
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU(b)
			for b.Loop() {
				sc := policy.NewScorer(c.cache.ForPod(c.policy), req, host)
				scores, fits := make([]float64, len(c.names)), make([]bool, len(c.names))
				c.cache.ViewEach(c.names, nil, func(i int, n policy.Node) { scores[i], fits[i] = sc.Score(n) })
				_ = policy.NormalizeScores(scores, fits)
				fitting = 0
				for _, f := range fits {
					if f {
						fitting++
					}
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(fitting), "fitting-nodes")
		})
	}
}
