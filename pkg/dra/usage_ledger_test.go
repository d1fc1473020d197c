package dra

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// claimPod is a pod of team-a with the pod claims claims (name → ResourceClaim name; ""
// names a template whose claim kubelet's status names <pod>-<claim>) and containers, each
// naming the pod claims listed (claim or claim/request).
func claimPod(name string, claims map[string]string, containers ...[]corev1.ResourceClaim) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: testNode}}
	for pc, rc := range claims {
		if rc != "" {
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: pc, ResourceClaimName: ptr.To(rc)})
			continue
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: pc, ResourceClaimTemplateName: ptr.To("tmpl")})
		pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses,
			corev1.PodResourceClaimStatus{Name: pc, ResourceClaimName: ptr.To(name + "-" + pc)})
	}
	for i, refs := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+i)), Resources: corev1.ResourceRequirements{Claims: refs}})
	}
	return pod
}

// prep is a prepared claim of team-a holding units on cards, one result per card (request
// "gpu", or the request given).
func prep(name string, devs ...PreparedDevice) PreparedClaim {
	return PreparedClaim{Namespace: "team-a", Name: name, Devices: devs}
}

func dev(request string, card int, units int64) PreparedDevice {
	return PreparedDevice{Request: request, Pool: testNode, Device: DeviceName(card), CardIndex: card, Units: units}
}

func refs(names ...string) []corev1.ResourceClaim {
	var out []corev1.ResourceClaim
	for _, n := range names {
		out = append(out, corev1.ResourceClaim{Name: n})
	}
	return out
}

func TestUsageLedgerGrants(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		prepared []PreparedClaim
		want     gpushare.PodAllocation
	}{{
		name:     "template claim named by the pod's status",
		pod:      claimPod("nb", map[string]string{"gpu": ""}, refs("gpu")),
		prepared: []PreparedClaim{prep("nb-gpu", dev("gpu", 0, 4))},
		want:     gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 4}}},
	}, {
		name:     "claim by name, two cards",
		pod:      claimPod("two", map[string]string{"gpu": "pair"}, refs("gpu")),
		prepared: []PreparedClaim{prep("pair", dev("gpu", 0, 2), dev("gpu", 1, 2))},
		want:     gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 2, 1: 2}}},
	}, {
		// What the limit hook enforces: each container is held to the whole claim.
		name:     "containers sharing a claim each get the claim's whole units",
		pod:      claimPod("shared", map[string]string{"gpu": "s"}, refs("gpu"), refs("gpu"), nil),
		prepared: []PreparedClaim{prep("s", dev("gpu", 1, 4))},
		want:     gpushare.PodAllocation{App: gpushare.Allocation{0: {1: 4}, 1: {1: 4}}},
	}, {
		name:     "a container naming two claims holds both",
		pod:      claimPod("both", map[string]string{"a": "ca", "b": "cb"}, refs("a", "b")),
		prepared: []PreparedClaim{prep("ca", dev("gpu", 0, 2)), prep("cb", dev("gpu", 0, 3))},
		want:     gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 5}}},
	}, {
		name: "a container naming one request of a claim holds only its results",
		pod: claimPod("req", map[string]string{"gpu": "multi"},
			[]corev1.ResourceClaim{{Name: "gpu", Request: "small"}}, []corev1.ResourceClaim{{Name: "gpu", Request: "big"}}),
		prepared: []PreparedClaim{prep("multi", dev("small", 0, 1), dev("big/t4", 1, 6))},
		want:     gpushare.PodAllocation{App: gpushare.Allocation{0: {0: 1}, 1: {1: 6}}},
	}, {
		name: "init containers too",
		pod: func() *corev1.Pod {
			p := claimPod("init", map[string]string{"gpu": "i"})
			p.Spec.InitContainers = []corev1.Container{{Name: "warm", Resources: corev1.ResourceRequirements{Claims: refs("gpu")}}}
			return p
		}(),
		prepared: []PreparedClaim{prep("i", dev("gpu", 0, 2))},
		want:     gpushare.PodAllocation{Init: gpushare.Allocation{0: {0: 2}}},
	}, {
		// Fail closed: what cannot be resolved grants nothing, so use shows as over or
		// unclaimed.
		name: "template claim the status does not name yet",
		pod: func() *corev1.Pod {
			p := claimPod("early", map[string]string{"gpu": ""}, refs("gpu"))
			p.Status.ResourceClaimStatuses = nil
			return p
		}(),
		prepared: []PreparedClaim{prep("early-gpu", dev("gpu", 0, 4))},
	}, {
		name:     "claim not prepared here (another driver's)",
		pod:      claimPod("other", map[string]string{"gpu": "nvidia"}, refs("gpu")),
		prepared: []PreparedClaim{prep("else", dev("gpu", 0, 4))},
	}, {
		name:     "container naming a claim the pod does not have",
		pod:      claimPod("typo", map[string]string{"gpu": "c"}, refs("gpus")),
		prepared: []PreparedClaim{prep("c", dev("gpu", 0, 4))},
	}, {
		name: "same-named claim in another namespace",
		pod:  claimPod("ns", map[string]string{"gpu": "c"}, refs("gpu")),
		prepared: []PreparedClaim{func() PreparedClaim {
			p := prep("c", dev("gpu", 0, 4))
			p.Namespace = "team-b"
			return p
		}()},
	}, {
		name:     "two prepared claims carry the name",
		pod:      claimPod("dup", map[string]string{"gpu": "c"}, refs("gpu")),
		prepared: []PreparedClaim{prep("c", dev("gpu", 0, 4)), prep("c", dev("gpu", 1, 4))},
	}, {
		name: "pod without claims",
		pod:  claimPod("plain", nil, nil),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			prepared := map[types.UID]PreparedClaim{}
			for i, p := range tc.prepared {
				prepared[types.UID(string(rune('a'+i)))] = p
			}
			l := usageLedger{
				pods:     func() []*corev1.Pod { return []*corev1.Pod{tc.pod} },
				prepared: func() map[types.UID]PreparedClaim { return prepared },
			}
			got := l.Grants()
			if len(got) != 1 || got[0].Pod != tc.pod {
				t.Fatalf("Grants() = %+v, want the one pod", got)
			}
			if !reflect.DeepEqual(got[0].Grant, tc.want) {
				t.Errorf("grant = %+v, want %+v", got[0].Grant, tc.want)
			}
		})
	}
}

// TestPreparedClaimsIsACopy: the watchdog reads the prepared claims while prepare and
// unprepare change them.
func TestPreparedClaimsIsACopy(t *testing.T) {
	d := newTestDriver(t, testConfig(t.TempDir()))
	d.prepared["u"] = prep("c", dev("gpu", 0, 4))
	got := d.preparedClaims()
	got["u"].Devices[0].Units = 9
	delete(got, "u")
	if p, ok := d.prepared["u"]; !ok || p.Devices[0].Units != 4 {
		t.Errorf("prepared claims after changing the copy: %+v", d.prepared)
	}
}
