package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	"github.com/gpushare/gpushare/pkg/version"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// parsed is what the flags say once read and checked.
type parsed struct {
	deviceList deviceplugin.DeviceListStrategy
	unit       gpushare.Unit
	res        gpushare.Resources
	backend    gpushare.Backend
	action     watchdog.OverGrantAction
	mpsEscape  watchdog.OverGrantAction
}

// run opens the node (noderuntime.Open) and serves it with the back end --backend names
// until ctx is done.
func run(ctx context.Context, o options) error {
	p, err := parseOptions(o)
	if err != nil {
		return err
	}
	node, shutdown, err := noderuntime.Open(ctx, nodeOptions(o, p))
	if err != nil {
		return err
	}
	defer shutdown()
	if p.backend == gpushare.BackendDRA {
		return runDRA(ctx, o, p, node)
	}
	return runDevicePlugin(ctx, o, p, node)
}

// parseOptions reads and checks the flags that are not plain strings or durations.
func parseOptions(o options) (parsed, error) {
	var p parsed
	var err error
	if p.deviceList, err = deviceplugin.ParseDeviceListStrategy(o.deviceList); err != nil {
		return p, fmt.Errorf("--device-list-strategy: %w", err)
	}
	if p.unit, err = gpushare.ParseUnit(o.memoryUnit); err != nil {
		return p, err
	}
	p.res = gpushare.Resources{Mem: corev1.ResourceName(o.memResource), Count: corev1.ResourceName(o.countResource)}
	if err := p.res.Validate(); err != nil {
		return p, err
	}
	if o.nodeName == "" {
		return p, errors.New("--node-name (or GPUSHARE_NODE_NAME) is required")
	}
	if p.backend, err = gpushare.ParseBackend(o.backend); err != nil {
		return p, fmt.Errorf("--backend: %w", err)
	}
	if d := o.limitHookFails; d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
		return p, fmt.Errorf("--limit-hook-failure-dir %q: want a clean absolute path", d)
	}
	if (o.nvidiaCDIHook != "" || o.nvidiaDriverRoot != "") && p.backend == gpushare.BackendDRA {
		return p, errors.New("--nvidia-cdi-hook-path and --nvidia-driver-root are for the device plugin back end: with --backend=dra the claims' specs name gpushare-limit-hook")
	}
	if p.action, err = watchdog.ParseOverGrantAction(o.overGrantAction); err != nil {
		return p, fmt.Errorf("--over-grant-action: %w", err)
	}
	if p.mpsEscape, err = watchdog.ParseMPSEscapeAction(o.mpsEscapeAction); err != nil {
		return p, fmt.Errorf("--mps-escape-action: %w", err)
	}
	return p, nil
}

// nodeOptions are the flags that shape the node, whichever back end serves it.
func nodeOptions(o options, p parsed) noderuntime.Options {
	return noderuntime.Options{
		NodeName: o.nodeName, Kubeconfig: o.kubeconfig, UserAgent: "share-plugin/" + version.Version,
		NVML: noderuntime.NVMLOptions{Library: o.nvmlLibrary, Simulate: o.simulate, SimulateFile: o.simulateFile,
			FaultsFile: o.faultsFile, SimulateProcesses: o.simulateProcesses},
		Unit: p.unit, HealthRecovery: o.healthRecovery, NodeResync: o.nodeResync, NVIDIARuntimeConfig: o.nvidiaConfig,
		Usage: noderuntime.Usage{Interval: o.usageInterval, ProcRoot: o.procRoot, UnclaimedExemptNamespaces: o.unclaimedExempt,
			OverGrant: watchdog.OverGrant{Threshold: o.overGrantThreshold, Grace: o.overGrantGrace, Action: p.action, MPSEscape: p.mpsEscape}},
	}
}

// runDRA serves the node through DRA (--backend=dra), its metrics and probes on
// --metrics-address.
func runDRA(ctx context.Context, o options, p parsed, node *noderuntime.Node) error {
	var serve func(context.Context, http.Handler)
	if o.metricsAddress != "" {
		serve = func(ctx context.Context, h http.Handler) { serveMetrics(ctx, o.metricsAddress, h) }
	}
	plugin, err := dra.New(dra.Config{
		MemResource: p.res.Mem, CDISpecDir: o.cdiSpecDir, CDIKind: o.cdiKind, PluginDataDir: o.draPluginDir, RegistrarDir: o.draRegistrarDir,
		LimitHookPath: o.limitHookPath, LimitHookFailureDir: o.limitHookFails, Serve: serve,
	}, node)
	if err != nil {
		return err
	}
	return plugin.Run(ctx)
}

// runDevicePlugin serves the node through kubelet's device plugin API, its metrics on
// --metrics-address.
func runDevicePlugin(ctx context.Context, o options, p parsed, node *noderuntime.Node) error {
	plugin, err := deviceplugin.New(deviceplugin.Config{
		Resources: p.res, PluginDir: o.pluginDir, AllocateWait: o.allocateWait, PodResourcesSocket: o.podResources,
		DeviceListStrategy: p.deviceList, CDIKind: o.cdiKind, CDISpecDir: o.cdiSpecDir,
		MPSRoot: o.mpsRoot, MPSReadyTimeout: o.mpsReady, MPSReleaseGrace: o.mpsGrace, MPSDaemonOverheadMiB: o.mpsOverhead, LimitHookPath: o.limitHookPath, LimitHookFailureDir: o.limitHookFails, NVIDIARuntimeConfig: o.nvidiaConfig,
		NVIDIACDIHookPath: o.nvidiaCDIHook, NVIDIADriverRoot: o.nvidiaDriverRoot,
	}, node)
	if err != nil {
		return err
	}
	if o.metricsAddress != "" {
		go serveMetrics(ctx, o.metricsAddress, plugin.Handler())
	}
	return plugin.Run(ctx)
}

func serveMetrics(ctx context.Context, addr string, h http.Handler) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("Serving metrics", "address", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Metrics server stopped")
	}
}
