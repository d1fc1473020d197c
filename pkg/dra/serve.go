package dra

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// serve labels the node with the isolation it enforces, builds the driver over specs,
// registers it with kubelet and runs, until ctx is done or the driver hits an error it
// cannot recover from: the probes and metrics (Config.Serve), the usage watchdog, the
// isolation label's resync, the node's health watch and the ResourceSlice publisher.
func (p *Plugin) serve(ctx context.Context, node *corev1.Node, specs nodecards.CardSpecs) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	n := p.node
	label := isolationLabel{client: n.Client(), recorder: n.Recorder(), node: n.Name(), enforced: enforcedIsolation(n.LimitUnsupported(), n.IsolationBlocked)}
	label.publish(ctx, node)
	probe := &probes{}
	driver, err := NewDriver(DriverConfig{
		NodeName: n.Name(), Inventory: gpushare.Inventory{Unit: n.Unit(), Devices: n.Cards()},
		Specs: specs, CDIKind: p.cfg.CDIKind, DataDir: p.cfg.PluginDataDir, Healthy: n.Health().Healthy,
		Fatal:         func(err error) { probe.stopped.Store(true); cancel(err) },
		Isolation:     nodeIsolation(n.Client(), n.Name(), label.publish),
		LimitHookPath: p.cfg.LimitHookPath, LimitUnsupported: n.LimitUnsupported(), IsolationBlocker: n.IsolationBlocked,
		LimitHookFailureDir: p.cfg.LimitHookFailureDir,
	})
	if err != nil {
		return err
	}
	usage := newUsageWatchdog(n, driver)
	m := p.newMetrics(usage)
	var wg sync.WaitGroup
	defer wg.Wait()
	helper, err := p.startHelper(ctx, node, observed{Driver: driver, m: m})
	if err != nil {
		return err
	}
	defer helper.Stop()
	defer cancel(nil) // before helper.Stop and wg.Wait
	// kubelet's NotifyRegistrationStatus call sets what RegistrationStatus returns.
	probe.registration = func() bool {
		s := helper.RegistrationStatus()
		return s != nil && s.PluginRegistered
	}
	p.startServices(ctx, &wg, driver, probe, m, usage, label)
	return publish(ctx, helper, n, probe)
}

// newMetrics are the plugin's metrics, with the watchdog's (nil: none runs) and the limit
// hook's failure records (with Config.LimitHookFailureDir).
func (p *Plugin) newMetrics(usage *watchdog.Watchdog) *metrics {
	m := newMetrics()
	if usage != nil {
		m.usage = usage.Collector()
	}
	if p.cfg.LimitHookFailureDir != "" {
		m.limitHook = nodecards.NewLimitHookFailures(p.cfg.LimitHookFailureDir, p.node.Name())
	}
	return m
}

// startHelper registers plugin with kubelet and serves it on the plugin's sockets.
// Errors: the sockets cannot be served.
func (p *Plugin) startHelper(ctx context.Context, node *corev1.Node, plugin kubeletplugin.DRAPlugin) (*kubeletplugin.Helper, error) {
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(gpushare.DRADriverName), kubeletplugin.KubeClient(p.node.Client()),
		kubeletplugin.NodeName(p.node.Name()), kubeletplugin.NodeUID(node.UID),
		kubeletplugin.PluginDataDirectoryPath(p.cfg.PluginDataDir), kubeletplugin.HealthService(false),
	}
	if p.cfg.RegistrarDir != "" {
		opts = append(opts, kubeletplugin.RegistrarDirectoryPath(p.cfg.RegistrarDir))
	}
	helper, err := kubeletplugin.Start(ctx, plugin, opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the kubelet DRA plugin: %w", err)
	}
	return helper, nil
}

// startServices runs, each in a goroutine of wg until ctx is done: Config.Serve with the
// driver's handler, the usage watchdog (nil: none), the isolation label's resync and the
// node's health watch.
func (p *Plugin) startServices(ctx context.Context, wg *sync.WaitGroup, driver *Driver, probe *probes, m *metrics, usage *watchdog.Watchdog, label isolationLabel) {
	if p.cfg.Serve != nil {
		wg.Add(1)
		go func() { defer wg.Done(); p.cfg.Serve(ctx, driver.handler(probe, m)) }()
	}
	if usage != nil {
		wg.Add(1)
		go func() { defer wg.Done(); runUsage(ctx, usage, p.node.Pods()) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); label.resync(ctx, p.node.Clock(), p.node.NodeResync()) }()
	go func() { defer wg.Done(); p.node.WatchHealth(ctx) }()
}

// publish publishes the node's devices, again on every health change, until ctx is done.
// Returns nil when ctx ends on its own and the cause when DriverConfig.Fatal ended it.
func publish(ctx context.Context, helper *kubeletplugin.Helper, n *noderuntime.Node, probe *probes) error {
	for {
		changed := n.Health().Changed() // before reading, so no change is missed
		res, err := DriverResources(n.Name(), n.Inventory(), n.Faults().Snapshot())
		if err != nil {
			return err
		}
		if err := helper.PublishResources(ctx, res); err != nil {
			return fmt.Errorf("publishing the node's ResourceSlice: %w", err)
		}
		probe.published.Store(true)
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		case <-changed:
		}
	}
}
