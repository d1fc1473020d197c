package dra

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkNode refuses to serve a node this back end must not serve, before anything is
// registered or published, and returns the node as read: a node not labelled for DRA,
// pods that still hold memory through the device plugin (checkDevicePluginPods), an API
// server that would drop the fields that let claims share a card (checkAPIServer,
// checkCapacityKept).
func (p *Plugin) checkNode(ctx context.Context) (*corev1.Node, error) {
	node, err := p.node.CheckBackend(ctx, gpushare.BackendDRA)
	if err != nil {
		return nil, err
	}
	client, name := p.node.Client(), p.node.Name()
	if err := checkDevicePluginPods(ctx, client, name, p.cfg.MemResource); err != nil {
		return nil, err
	}
	if err := checkAPIServer(ctx, client.Discovery()); err != nil {
		return nil, err
	}
	res, err := DriverResources(name, gpushare.Inventory{Unit: p.node.Unit(), Devices: p.node.Cards()}, nil)
	if err != nil {
		return nil, err
	}
	if err := checkCapacityKept(ctx, client, name, res.Pools[name].Slices[0].Devices); err != nil {
		return nil, err
	}
	return node, nil
}
