package deviceplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestGrantsForTheWatchdog: the watchdog sees each pod's grant as Allocate does: the valid
// allocation record, overridden by what this process granted; nothing for a refused pod.
func TestGrantsForTheWatchdog(t *testing.T) {
	one := []ctr{{name: "main", units: 4}}
	e := newTestEnv(t, "t4:2",
		makePod("annotated", 1, 10, one, app(gpushare.CardUnits{0: 4})),
		makePod("granted", 2, 11, one, app(gpushare.CardUnits{0: 4})),
		makePod("refused", 3, 12, one, app(gpushare.CardUnits{1: 4})),
	)
	byName := map[string]gpushare.PodAllocation{}
	for _, pod := range e.plugin.podsOnNode() {
		switch pod.Name {
		case "granted":
			e.plugin.ledger.grantContainers(pod, app(gpushare.CardUnits{1: 4}), true, gpushare.ContainerRef{Index: 0})
		case "refused":
			e.plugin.ledger.refuse(pod)
		}
	}
	for _, pc := range (usageLedger{e.plugin}).Grants() {
		byName[pc.Pod.Name] = pc.Grant
	}
	want := map[string]gpushare.PodAllocation{
		"annotated": app(gpushare.CardUnits{0: 4}),
		"granted":   app(gpushare.CardUnits{1: 4}),
		"refused":   {},
	}
	if diff := cmp.Diff(want, byName); diff != "" {
		t.Errorf("grants (-want,+got):\n%s", diff)
	}
}
