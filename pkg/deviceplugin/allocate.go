package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Event reasons on pods.
const (
	// eventAllocateRefused (Warning): a container's cards lack room; kubelet fails the pod.
	eventAllocateRefused = "GPUShareAllocateRefused"
	// eventCardChosen (Normal): the plugin chose the cards of a pod without a valid allocation.
	eventCardChosen = "GPUShareCardChosen"
)

// Allocate is called by kubelet once per container with only the fake device IDs. Its
// steps, each in the file named after it: find the container (findCandidate, match.go),
// check the pod against the node's isolation label and decide its cards against the
// ledger (decideCards, decide.go), then write the truth on the pod, grant it in the ledger
// and answer with the card UUIDs, on an MPS node the container's MPS limit and daemon
// folders (respond.go), and on a limit node the hook that sets its limits (limit.go). No match or no room is an error: kubelet then fails the pod's
// admission with the message, instead of the container silently running on a wrong or
// full card.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	// Kubelet admits pods one at a time; serialising keeps "next unserved container" exact.
	p.mu.Lock()
	defer p.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		r, err := p.allocateOne(ctx, len(cr.DevicesIds))
		if err != nil {
			klog.ErrorS(err, "Allocate failed", "units", len(cr.DevicesIds))
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

func (p *Plugin) allocateOne(ctx context.Context, n int) (*pluginapi.ContainerAllocateResponse, error) {
	if n <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "gpushare: allocate request with no %s devices", p.cfg.Resources.Mem)
	}
	c, view, err := p.findCandidate(ctx, int64(n))
	if err != nil {
		return nil, err
	}
	iso, isoErr, err := p.nodeIsolation(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "gpushare: %v", err)
	}
	var (
		d       cardDecision
		mpsEnv  map[string]string
		mounts  []*pluginapi.Mount
		ref     *refusal
		refused = p.isolationRefusal(c, iso, isoErr)
	)
	if refused == nil {
		if why := p.isolationUnavailable(iso); why != nil {
			refused = &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: node %s is labelled %s=%s but cannot enforce it: %v",
				c.cont.Name, klog.KObj(c.pod), p.node.Name(), gpushare.LabelIsolation, iso, why)}
		}
	}
	if refused != nil {
		err = refused
	} else {
		d, err = p.decideCards(c, view)
	}
	if err == nil && iso == gpushare.IsolationMPS {
		mpsEnv, mounts, err = p.mpsResponse(ctx, c, d)
	}
	var (
		hooks    []*cdi.Hook
		limitEnv map[string]string
	)
	if err == nil && iso == gpushare.IsolationLimit {
		hooks, limitEnv, err = p.limitHooks(c, d)
	}
	switch {
	case errors.As(err, &ref):
		return nil, p.refuse(c, ref)
	case err != nil:
		return nil, status.Errorf(codes.FailedPrecondition, "gpushare: %v", err)
	}
	done := c.done
	done[c.cont.Ref] = true
	all := true
	for _, ct := range c.req.Containers {
		all = all && done[ct.Ref]
	}
	if err := p.writeProgress(ctx, c, d, done, all); err != nil {
		return nil, status.Errorf(codes.Unavailable, "gpushare: recording allocation of pod %s container %q: %v", klog.KObj(c.pod), c.cont.Name, err)
	}
	p.ledger.grantContainers(c.pod, d.alloc, p.informerHas(c.pod), c.cont.Ref)
	env := containerEnv(c, d.cards)
	maps.Copy(env, mpsEnv)
	maps.Copy(env, limitEnv)
	if d.placed {
		p.node.Recorder().Eventf(c.pod, corev1.EventTypeNormal, eventCardChosen,
			"share-plugin chose the pod's cards (%s) because it had no valid allocation: %v", usageString(d.alloc.CardUsage(c.pod)), d.why)
	}
	klog.InfoS("Allocated", "pod", klog.KObj(c.pod), "container", c.cont.Name, "units", n,
		"cards", env[gpushare.EnvIndex], "uuids", env[gpushare.EnvVisibleDevices], "perCard", d.units, "placedByPlugin", d.placed, "podAssigned", all,
		"isolation", iso, "mpsLimit", mpsEnv[gpushare.EnvMPSPinnedMemLimit])
	resp, err := p.handOver(c, env, d.cards, hooks)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "gpushare: handing over the cards of pod %s container %q: %v", klog.KObj(c.pod), c.cont.Name, err)
	}
	resp.Mounts = mounts
	return resp, nil
}
