package dra

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestPreparePodClaims: on a limit node, each claim's spec limits the pod it is prepared for
// to the sum of all the claims prepared for that pod, per card, whether kubelet prepares them
// in one call or one by one: a later claim rewrites the earlier ones' specs with the larger
// sum. Another pod's claims count only for that pod.
func TestPreparePodClaims(t *testing.T) {
	const (
		podA   = "aaaaaaaa-0000-4000-8000-00000000000a"
		podB   = "bbbbbbbb-0000-4000-8000-00000000000b"
		claim1 = "dddddddd-0000-4000-8000-000000000011"
		claim2 = "dddddddd-0000-4000-8000-000000000012"
		claim3 = "dddddddd-0000-4000-8000-000000000013"
	)
	newClaims := func() []*resourceapi.ResourceClaim {
		return []*resourceapi.ResourceClaim{
			forPods(claim(claim1, "one", result("gpu", "gpu-0", "2Gi")), podA),
			forPods(claim(claim2, "two", result("a", "gpu-0", "1Gi"), result("b", "gpu-1", "3Gi")), podA),
			forPods(claim(claim3, "other", result("gpu", "gpu-0", "5Gi")), podB),
		}
	}
	podALimits := []string{"--pod-uid=" + podA, "--pod-limit=GPU-aaaa=3072", "--pod-limit=GPU-bbbb=3072"}
	want := map[string][]string{
		claim1: podALimits,
		claim2: podALimits,
		claim3: {"--pod-uid=" + podB, "--pod-limit=GPU-aaaa=5120"},
	}
	wantOwn := map[string][]string{ // each container's own limits stay the claim's
		claim1: {"GPU-aaaa=2048"},
		claim2: {"GPU-aaaa=1024", "GPU-bbbb=3072"},
		claim3: {"GPU-aaaa=5120"},
	}
	for _, tc := range []struct {
		name  string
		calls [][]int // the claims of each prepare call, by index
	}{
		{name: "one call", calls: [][]int{{0, 1, 2}}},
		{name: "one by one", calls: [][]int{{0}, {2}, {1}}},
		{name: "one by one, the larger first", calls: [][]int{{1}, {0}, {2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			cfg.LimitHookPath = "/hook"
			cfg.Isolation = func(context.Context) (gpushare.Isolation, error) { return gpushare.IsolationLimit, nil }
			d := newTestDriver(t, cfg)
			claims := newClaims()
			for _, call := range tc.calls {
				var batch []*resourceapi.ResourceClaim
				for _, i := range call {
					batch = append(batch, claims[i])
				}
				res, _ := d.PrepareResourceClaims(context.Background(), batch)
				for _, c := range batch {
					if err := res[c.UID].Err; err != nil {
						t.Fatalf("claim %s: %v", c.Name, err)
					}
				}
			}
			got, gotOwn := map[string][]string{}, map[string][]string{}
			for uid := range want {
				got[uid], gotOwn[uid] = podLimitArgs(t, cfg, uid), limitArgs(t, cfg, uid)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pod arguments by claim (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantOwn, gotOwn); diff != "" {
				t.Errorf("container limits by claim (-want +got):\n%s", diff)
			}
			if d.prepared[claim1].PodUID != podA || d.prepared[claim3].PodUID != podB {
				t.Errorf("recorded pods %q, %q; want %s, %s", d.prepared[claim1].PodUID, d.prepared[claim3].PodUID, podA, podB)
			}

			// After a restart, a repeat answers with the same pod sums.
			d2 := newTestDriver(t, cfg)
			res, _ := d2.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claims[0]})
			if err := res[claims[0].UID].Err; err != nil {
				t.Fatal(err)
			}
			if g := podLimitArgs(t, cfg, claim1); strings.Join(g, " ") != strings.Join(podALimits, " ") {
				t.Errorf("after a restart, pod arguments %v, want %v", g, podALimits)
			}
		})
	}
}

// TestPreparedClaimServesItsPodOnly: a claim prepared for one pod and later reserved by another
// (kubelet prepares a claim once per node, so the second pod gets the same spec) keeps the
// first pod's UID in its spec: the hook then refuses the second pod's containers.
func TestPreparedClaimServesItsPodOnly(t *testing.T) {
	const (
		first  = "aaaaaaaa-0000-4000-8000-00000000000a"
		second = "bbbbbbbb-0000-4000-8000-00000000000b"
		uid    = "dddddddd-0000-4000-8000-000000000021"
	)
	cfg := testConfig(t.TempDir())
	cfg.LimitHookPath = "/hook"
	cfg.Isolation = func(context.Context) (gpushare.Isolation, error) { return gpushare.IsolationLimit, nil }
	d := newTestDriver(t, cfg)
	for _, pod := range []string{first, second} {
		c := forPods(claim(uid, "shared", result("gpu", "gpu-0", "4Gi")), pod)
		res, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
		if err := res[c.UID].Err; err != nil {
			t.Fatal(err)
		}
		want := []string{"--pod-uid=" + first, "--pod-limit=GPU-aaaa=4096"}
		if got := podLimitArgs(t, cfg, uid); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("reserved for %s: pod arguments %v, want %v", pod, got, want)
		}
	}
}
