package schedulerplugin

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The PreScore benchmarks' cluster: benchNodes nodes holding benchClaims allocated claims,
// of which PreScore rates every benchScoredEvery-th node (kube-scheduler's default share of
// 5000 nodes: 10%).
const (
	benchNodes       = 5000
	benchClaims      = 10000
	benchScoredEvery = 10
)

// draCluster is the benchmarks' cluster under fgd: benchNodes DRA nodes of four 16 GiB
// cards holding benchClaims allocated claims of 1-3 GiB between them, or (dra false)
// nodes without a gpushare ResourceSlice whose claims are another driver's; and the
// pending claim "notebook" of 4 GiB. It returns the plugin and the NodeInfos PreScore is
// given (all: every node's, PreFilter's).
func draCluster(b *testing.B, dra bool) (f *fixture, infos, all []fwk.NodeInfo) {
	d := &fakeDRA{}
	var objs []runtime.Object
	for i := range benchNodes {
		node := fmt.Sprintf("n%04d", i)
		if dra {
			d.slices = append(d.slices, draSlice(b, node, gpushare.GiB, []int64{16, 16, 16, 16}))
		}
		objs = append(objs, ct.BareNode(node))
		all = append(all, nodeInfo(node))
		if i%benchScoredEvery == 0 {
			infos = append(infos, nodeInfo(node))
		}
	}
	for i := range benchClaims {
		node := fmt.Sprintf("n%04d", i%benchNodes)
		cl := allocated(fmt.Sprintf("c%d", i), held{node, fmt.Sprintf("gpu-%d", i%4), fmt.Sprintf("%dGi", 1+i%3)})
		if !dra {
			cl.Status.Allocation.Devices.Results[0].Driver = "other.example.com"
		}
		d.claims = append(d.claims, cl)
	}
	d.claims = append(d.claims, pending("notebook", ask("4Gi", 1)))
	d.byName = map[types.NamespacedName]*resourceapi.ResourceClaim{}
	for _, cl := range d.claims {
		d.byName[types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}] = cl
	}
	return startWithDRA(b, &GPUShareArgs{Policy: "fgd"}, d, objs...), infos, all
}

// benchPreScore runs PreFilter, PreScore and NormalizeScore for a pod on infos, as one
// scheduling cycle's scoring does: a pod without GPU, or (claims) one with the claim
// "notebook". It reports the process's CPU time per op (cpu-ns/op) besides the wall time:
// on a shared machine it depends far less on the other load.
func benchPreScore(b *testing.B, f *fixture, infos []fwk.NodeInfo, claims bool) {
	ctx := context.Background()
	p := ct.Pod("cpu", 0)
	if claims {
		p = claimPod("nb", "notebook")
	}
	list := make(fwk.NodeScoreList, len(infos))
	for i, n := range infos {
		list[i].Name = n.Node().Name
	}
	b.ReportAllocs()
	start := processCPU(b)
	for b.Loop() {
		st, _, _ := f.prefilter(b, p)
		if s := f.pl.PreScore(ctx, st, p, infos); !s.IsSuccess() {
			b.Fatal(s)
		}
		if s := f.pl.NormalizeScore(ctx, st, p, list); !s.IsSuccess() {
			b.Fatal(s)
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has spent, every thread's.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPreScoreCPUOnlyPod is PreScore under fgd for a pod that asks no GPU memory,
// rating 500 nodes of 5000 with 10,000 claims in the cluster: DRA nodes, and nodes
// without a gpushare ResourceSlice (the claims another driver's).
func BenchmarkPreScoreCPUOnlyPod(b *testing.B) {
	for _, tc := range []struct {
		name string
		dra  bool
	}{{"dra-nodes", true}, {"no-gpushare-slices", false}} {
		b.Run(tc.name, func(b *testing.B) {
			f, infos, _ := draCluster(b, tc.dra)
			benchPreScore(b, f, infos, false)
		})
	}
}

// BenchmarkPreScoreClaimPod is PreScore under fgd for a pod with a pending 4 GiB gpushare
// claim, rating 500 DRA nodes of 5000 with 10,000 claims in the cluster.
func BenchmarkPreScoreClaimPod(b *testing.B) {
	f, infos, _ := draCluster(b, true)
	benchPreScore(b, f, infos, true)
}

// BenchmarkPreFilterClaimPod is PreFilter under fgd for a pod with a pending 4 GiB gpushare
// claim given all 5000 DRA nodes with 10,000 claims: reading them and keeping the
// narrowNodes best-rated that hold the claim (narrowDRA).
func BenchmarkPreFilterClaimPod(b *testing.B) {
	f, _, all := draCluster(b, true)
	ctx := context.Background()
	p := claimPod("nb", "notebook")
	b.ReportAllocs()
	start := processCPU(b)
	for b.Loop() {
		f.pl.narrowed.forget(p.UID)
		res, s := f.pl.PreFilter(ctx, newState(), p, all)
		if !s.IsSuccess() || res.NodeNames.Len() != narrowNodes {
			b.Fatalf("PreFilter = %v, %v", res, s)
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}
