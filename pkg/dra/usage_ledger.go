package dra

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// usageLedger is what the node's pods hold on the DRA back end, as the usage watchdog
// reads it (watchdog.Ledger): each container is granted the units of the prepared claims
// it names. A container sharing a claim with other containers is granted the claim's whole
// units, each of them: the claim's CDI device, and with it the limit hook's limit, is the
// same for every container that names it.
type usageLedger struct {
	// pods is the node's pod view.
	pods func() []*corev1.Pod
	// prepared is a copy of the claims this plugin has prepared.
	prepared func() map[types.UID]PreparedClaim
}

var _ watchdog.Ledger = usageLedger{}

// Grants returns every pod of the pod view with the cards and units its containers hold
// through the prepared claims they name. It fails closed: a claim that cannot be resolved
// (the pod's status does not name it yet, it is not prepared here, two prepared claims
// carry its name) grants nothing, so its containers' use shows as over their grant or
// unclaimed, never as granted.
func (l usageLedger) Grants() []watchdog.PodGrant {
	byName := map[types.NamespacedName][]PreparedClaim{}
	for _, p := range l.prepared() {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		byName[key] = append(byName[key], p)
	}
	pods := l.pods()
	out := make([]watchdog.PodGrant, 0, len(pods))
	for _, pod := range pods {
		out = append(out, watchdog.PodGrant{Pod: pod, Grant: podGrants(pod, byName)})
	}
	return out
}

// podGrants is, per container of pod (app and init), the units on each card of the
// prepared claims (byName) the container names.
func podGrants(pod *corev1.Pod, byName map[types.NamespacedName][]PreparedClaim) gpushare.PodAllocation {
	var a gpushare.PodAllocation
	for _, list := range []struct {
		init bool
		ctrs []corev1.Container
	}{{false, pod.Spec.Containers}, {true, pod.Spec.InitContainers}} {
		for i, c := range list.ctrs {
			units := gpushare.CardUnits{}
			for _, ref := range c.Resources.Claims {
				name, ok := claimName(pod, ref.Name)
				if !ok {
					continue
				}
				found := byName[types.NamespacedName{Namespace: pod.Namespace, Name: name}]
				if len(found) != 1 {
					continue // not prepared here (another driver's, or not yet), or ambiguous
				}
				for _, d := range found[0].Devices {
					if requested(ref.Request, d.Request) {
						units[d.CardIndex] += d.Units
					}
				}
			}
			if len(units) > 0 {
				a.Set(gpushare.ContainerRef{InitList: list.init, Index: i}, units)
			}
		}
	}
	return a
}

// claimName is the name of the ResourceClaim behind the pod's claim entry podClaim
// (spec.resourceClaims): its resourceClaimName, or for a template the name kubelet's
// status records. false: the pod has no such entry, or the claim is not created yet.
func claimName(pod *corev1.Pod, podClaim string) (string, bool) {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.Name != podClaim {
			continue
		}
		if pc.ResourceClaimName != nil {
			return *pc.ResourceClaimName, true
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == podClaim && st.ResourceClaimName != nil {
				return *st.ResourceClaimName, true
			}
		}
		return "", false
	}
	return "", false
}

// requested reports whether an allocation result for request result is one the container's
// claim reference asks for: every result when it names no request, else the results of
// that request (result "<request>" or, for a firstAvailable subrequest, "<request>/<sub>").
func requested(ref, result string) bool {
	return ref == "" || result == ref || strings.HasPrefix(result, ref+"/")
}
