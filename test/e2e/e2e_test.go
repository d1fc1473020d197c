//go:build e2e

package e2e

import "testing"

// The reference scenario runs first: it reads the cluster-wide occupancy of the real node.

func TestReferenceScenario(t *testing.T)       { CaseReferenceScenario(t, env) }
func TestControlPlaneVersion(t *testing.T)     { CaseControlPlaneVersion(t, env) }
func TestPerCardFit(t *testing.T)              { CasePerCardFit(t, env) }
func TestCardChoice(t *testing.T)              { CaseCardChoice(t, env) }
func TestDeleteFreesMemory(t *testing.T)       { CaseDeleteFreesMemory(t, env) }
func TestResourceQuotaGPUMem(t *testing.T)     { CaseResourceQuotaGPUMem(t, env) }
func TestKueueRecipeDryRun(t *testing.T)       { CaseKueueRecipeDryRun(t, env) }
func TestExtenderRestart(t *testing.T)         { CaseExtenderRestart(t, env) }
func TestMultiContainerMultiCard(t *testing.T) { CaseMultiContainerMultiCard(t, env) }

// gpushare-scheduler, the framework plugin front end, on the same cluster (MODE=both).

func TestPluginReferenceScenario(t *testing.T)       { CasePluginReferenceScenario(t, env) }
func TestPluginPerCardFit(t *testing.T)              { CasePluginPerCardFit(t, env) }
func TestPluginCardChoice(t *testing.T)              { CasePluginCardChoice(t, env) }
func TestPluginMultiContainerMultiCard(t *testing.T) { CasePluginMultiContainerMultiCard(t, env) }
func TestPluginPreemption(t *testing.T)              { CasePluginPreemption(t, env) }
func TestPluginRetriesOnlyWhenMemoryFrees(t *testing.T) {
	CasePluginRetriesOnlyWhenMemoryFrees(t, env)
}

func TestDeployManifestsDryRun(t *testing.T)     { CaseDeployManifestsDryRun(t, env) }
func TestRealNodeTwoCards(t *testing.T)          { CaseRealNodeTwoCards(t, env) }
func TestKubeletRestart(t *testing.T)            { CaseKubeletRestart(t, env) }
func TestCDIHandover(t *testing.T)               { CaseCDIHandover(t, env) }
func TestCDIAllocationEnvLoses(t *testing.T)     { CaseCDIAllocationEnvLoses(t, env) }
func TestReservedEnvFromConfigMap(t *testing.T)  { CaseReservedEnvFromConfigMap(t, env) }
func TestUsageWatchdog(t *testing.T)             { CaseUsageWatchdog(t, env) }
func TestUsageWatchdogUnclaimed(t *testing.T)    { CaseUsageWatchdogUnclaimed(t, env) }
func TestNodePreflight(t *testing.T)             { CaseNodePreflight(t, env) }
func TestMPSIsolation(t *testing.T)              { CaseMPSIsolation(t, env) }
func TestLimitHookRecordsGrant(t *testing.T)     { CaseLimitHookRecordsGrant(t, env) }
func TestChaosExtenderKills(t *testing.T)        { CaseChaosExtenderKills(t, env) }
func TestChaosDelayedBinding(t *testing.T)       { CaseChaosDelayedBinding(t, env) }
func TestChaosTenantEdits(t *testing.T)          { CaseChaosTenantEdits(t, env) }
func TestChaosSelfPlaced(t *testing.T)           { CaseChaosSelfPlaced(t, env) }
func TestChaosSameSizePods(t *testing.T)         { CaseChaosSameSizePods(t, env) }
func TestAnonymousBindRefusedAtTLS(t *testing.T) { CaseAnonymousBindRefusedAtTLS(t, env) }
func TestAdmissionTenant(t *testing.T)           { CaseAdmissionTenantAllocation(t, env) }
func TestAdmissionNodeScope(t *testing.T)        { CaseAdmissionSharePluginNodeScope(t, env) }
func TestAdmissionSelfPlacement(t *testing.T)    { CaseAdmissionSelfPlacement(t, env) }
func TestReservedEnvTenant(t *testing.T)         { CaseReservedEnvTenant(t, env) }
func TestBindChecksRequest(t *testing.T)         { CaseBindChecksRequest(t, env) }
func TestSlowBodies(t *testing.T)                { CaseSlowBodies(t, env) }
func TestExtenderFailover(t *testing.T)          { CaseExtenderFailover(t, env) }
func TestFailoverLateBinding(t *testing.T)       { CaseFailoverLateBinding(t, env) }
func TestSharePluginUnitChange(t *testing.T)     { CaseSharePluginRefusesUnitChange(t, env) }
func TestDRABackend(t *testing.T)                { CaseDRABackend(t, env) }
func TestDRALimit(t *testing.T)                  { CaseDRALimit(t, env) }
func TestDRAUsageWatchdog(t *testing.T)          { CaseDRAUsageWatchdog(t, env) }

// The Helm chart last: its installs stand in for the local share-plugin (and
// gpushare-scheduler, and kube-scheduler's configuration) and put them back afterwards.

func TestHelmChartDryRun(t *testing.T)      { CaseHelmChartDryRun(t, env) }
func TestHelmChartCRDDryRun(t *testing.T)   { CaseHelmChartCRDDryRun(t, env) }
func TestHelmInstallExtender(t *testing.T)  { CaseHelmInstall(t, env, "extender") }
func TestHelmInstallScheduler(t *testing.T) { CaseHelmInstall(t, env, "scheduler") }
