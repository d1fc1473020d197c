//go:build e2e

package e2e

import (
	"flag"
	"math/rand/v2"
	"testing"
)

// shuffle runs the suite in a random order from this seed (0: the table's order), to show
// that no case depends on the ones before it: make e2e E2E_FLAGS='-args -e2e.shuffle=7'.
var shuffle = flag.Uint64("e2e.shuffle", 0, "run the suite's cases in a random order from this seed (0: in order)")

// suite is the e2e suite in the order it runs. Each case undoes what it changes in its own
// t.Cleanup (namespaces, kwok nodes, components restarted with other settings, node labels)
// and TestE2E checks after each one that the cluster is as it was before it (restore.go), so
// any case also passes alone:
//
//	make e2e E2E_FLAGS='-run TestE2E/^PerCardFit$ -v'
//
// What each case shows is the doc comment of its function.
var suite = []struct {
	name string
	run  func(*testing.T, *Env)
}{
	// The reference scenario first: it is the user guide's, on a node nobody touched yet.
	{"ReferenceScenario", CaseReferenceScenario},
	{"ControlPlaneVersion", CaseControlPlaneVersion},
	{"PerCardFit", CasePerCardFit},
	{"CardChoice", CaseCardChoice},
	{"DeleteFreesMemory", CaseDeleteFreesMemory},
	{"ResourceQuotaGPUMem", CaseResourceQuotaGPUMem},
	{"KueueRecipeDryRun", CaseKueueRecipeDryRun},
	{"ExtenderRestart", CaseExtenderRestart},
	{"MultiContainerMultiCard", CaseMultiContainerMultiCard},

	// gpushare-scheduler, the framework plugin front end, on the same cluster (MODE=both).
	{"PluginReferenceScenario", CasePluginReferenceScenario},
	{"PluginPerCardFit", CasePluginPerCardFit},
	{"PluginCardChoice", CasePluginCardChoice},
	{"PluginMultiContainerMultiCard", CasePluginMultiContainerMultiCard},
	{"PluginPreemption", CasePluginPreemption},
	{"PluginNarrowFallback", CasePluginNarrowFallback},
	{"PluginRetriesOnlyWhenMemoryFrees", CasePluginRetriesOnlyWhenMemoryFrees},

	{"DeployManifestsDryRun", CaseDeployManifestsDryRun},
	{"RealNodeTwoCards", CaseRealNodeTwoCards},
	{"KubeletRestart", CaseKubeletRestart},
	{"CDIHandover", CaseCDIHandover},
	{"CDIAllocationEnvLoses", CaseCDIAllocationEnvLoses},
	{"ReservedEnvFromConfigMap", CaseReservedEnvFromConfigMap},
	{"UsageWatchdog", CaseUsageWatchdog},
	{"UsageWatchdogUnclaimed", CaseUsageWatchdogUnclaimed},
	{"NodePreflight", CaseNodePreflight},
	{"MPSIsolation", CaseMPSIsolation},
	{"MPSDaemons", CaseMPSDaemons},
	{"ComputeShare", CaseComputeShare},
	{"MPSEscape", CaseMPSEscape},
	{"LimitHookRecordsGrant", CaseLimitHookRecordsGrant},
	{"BurstableLimit", CaseBurstableLimit},
	{"VerifyIsolation", CaseVerifyIsolation},
	{"ChaosExtenderKills", CaseChaosExtenderKills},
	{"ChaosDelayedBinding", CaseChaosDelayedBinding},
	{"ChaosTenantEdits", CaseChaosTenantEdits},
	{"ChaosSelfPlaced", CaseChaosSelfPlaced},
	{"ChaosSameSizePods", CaseChaosSameSizePods},
	{"AnonymousBindRefusedAtTLS", CaseAnonymousBindRefusedAtTLS},
	{"AdmissionTenant", CaseAdmissionTenantAllocation},
	{"AdmissionNodeScope", CaseAdmissionSharePluginNodeScope},
	{"AdmissionSelfPlacement", CaseAdmissionSelfPlacement},
	{"ReservedEnvTenant", CaseReservedEnvTenant},
	{"BindChecksRequest", CaseBindChecksRequest},
	{"SlowBodies", CaseSlowBodies},
	{"ExtenderFailover", CaseExtenderFailover},
	{"FailoverLateBinding", CaseFailoverLateBinding},
	{"SharePluginUnitChange", CaseSharePluginRefusesUnitChange},
	{"DRABackend", CaseDRABackend},
	{"DRAKilledBetweenSpecAndCheckpoint", CaseDRAKilledBetweenSpecAndCheckpoint},
	{"DRALimit", CaseDRALimit},
	{"DRAUsageWatchdog", CaseDRAUsageWatchdog},

	// The Helm chart last: its installs stand in for the local share-plugin (and
	// gpushare-scheduler, and kube-scheduler's configuration) and put them back afterwards.
	{"HelmChartDryRun", CaseHelmChartDryRun},
	{"HelmChartCRDDryRun", CaseHelmChartCRDDryRun},
	{"HelmInstallExtender", func(t *testing.T, e *Env) { CaseHelmInstall(t, e, "extender") }},
	{"HelmInstallScheduler", func(t *testing.T, e *Env) { CaseHelmInstall(t, e, "scheduler") }},
}

// TestE2E runs the suite in order, each case as a subtest that fails when the case leaves
// the cluster changed (restore.go), so that no case depends on the one before it.
func TestE2E(t *testing.T) {
	cases := suite
	if *shuffle != 0 {
		cases = append(cases[:0:0], suite...)
		rand.New(rand.NewPCG(*shuffle, 0)).Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
		t.Logf("cases in the order of seed %d", *shuffle)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := takeBaseline(t, env)
			// Registered first, so it runs after every cleanup the case registers.
			t.Cleanup(func() { checkRestored(t, env, before) })
			c.run(t, env)
		})
	}
}
