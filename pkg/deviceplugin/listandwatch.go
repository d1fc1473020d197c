package deviceplugin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// GetDevicePluginOptions tells kubelet to ask for preferred allocations.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends the fake devices and sends them again whenever a card's health changes.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	counted := false
	defer func() {
		if counted {
			p.streams.Add(-1)
		}
	}()
	for {
		changed := p.health.Changed()
		resp := &pluginapi.ListAndWatchResponse{Devices: deviceList(p.cards.List(), p.health.Healthy)}
		if err := stream.Send(resp); err != nil {
			return fmt.Errorf("sending devices to kubelet: %w", err)
		}
		if !counted {
			counted = true
			p.streams.Add(1)
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

// PreStartContainer is not used (PreStartRequired is false).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
