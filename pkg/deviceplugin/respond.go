package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// refuse marks c's pod refused in the ledger (see refused), tells the pod in a Warning
// event and returns the error for kubelet, which fails the pod's admission with it.
func (p *Plugin) refuse(c candidate, r *refusal) error {
	p.ledger.refuse(c.pod)
	p.node.Recorder().Event(c.pod, corev1.EventTypeWarning, eventAllocateRefused, r.msg)
	return status.Errorf(codes.FailedPrecondition, "gpushare: %s", r.msg)
}

// writeProgress records on the pod, before kubelet gets the answer, the served containers
// and ASSIGNED=true once all are served; for a pod the plugin placed, also the allocation
// record it chose (the bind annotations, stale ones removed), so the extender and inspect
// see the truth. The pod's UID is a precondition: a re-created pod of the same name is not
// touched.
func (p *Plugin) writeProgress(ctx context.Context, c candidate, d cardDecision, done map[gpushare.ContainerRef]bool, all bool) error {
	ann := map[string]*string{}
	if d.placed {
		bind := gpushare.BindAnnotations(d.alloc, c.req.TotalUnits(), p.cardUnits(), p.node.Unit(), p.node.Clock().Now())
		for _, k := range gpushare.BindAnnotationKeys() {
			if v, ok := bind[k]; ok {
				ann[k] = &v
			} else {
				ann[k] = nil
			}
		}
	}
	progress := gpushare.FormatAllocated(done)
	ann[gpushare.AnnotationAllocated] = &progress
	if all {
		t := "true"
		ann[gpushare.AnnotationAssigned] = &t
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": c.pod.UID, "annotations": ann}})
	if err != nil {
		return err
	}
	permanent := func(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	return retry.OnError(retry.DefaultBackoff, func(err error) bool { return !permanent(err) }, func() error {
		_, err := p.node.Client().CoreV1().Pods(c.pod.Namespace).Patch(ctx, c.pod.Name, types.MergePatchType, body, metav1.PatchOptions{})
		return err
	})
}

// cardUnits is every card's size in units, by index.
func (p *Plugin) cardUnits() gpushare.CardUnits {
	out := gpushare.CardUnits{}
	for _, c := range p.cards.List() {
		out[c.Index] = c.Units
	}
	return out
}

// usageString writes per-card units as "card 0: 4 units, card 1: 2 units".
func usageString(u gpushare.CardUnits) string {
	parts := make([]string, 0, len(u))
	for _, c := range slices.Sorted(maps.Keys(u)) {
		parts = append(parts, fmt.Sprintf("card %d: %d units", c, u[c]))
	}
	return strings.Join(parts, ", ")
}

// containerEnv is what the container sees: its card UUIDs and indexes, its units, the pod's
// units and the size of its (first) card.
func containerEnv(c candidate, cards []gpushare.Device) map[string]string {
	uuids := make([]string, len(cards))
	idx := make([]string, len(cards))
	for i, card := range cards {
		uuids[i] = card.UUID
		idx[i] = strconv.Itoa(card.Index)
	}
	return map[string]string{
		gpushare.EnvVisibleDevices: strings.Join(uuids, ","),
		gpushare.EnvIndex:          strings.Join(idx, ","),
		gpushare.EnvPodUnits:       strconv.FormatInt(c.req.TotalUnits(), 10),
		gpushare.EnvContainerUnits: strconv.FormatInt(c.cont.Units, 10),
		gpushare.EnvDevUnits:       strconv.FormatInt(cards[0].Units, 10),
	}
}

// handOver is candidate c's answer: env (containerEnv's, and on an MPS node the daemon's)
// and, per the strategy, the cards as NVIDIA_VISIBLE_DEVICES (envvar), as the node's CDI
// devices by UUID (cdi-cri), or as one CDI device naming this allocation whose spec carries
// the cards, env (CUDA_VISIBLE_DEVICES added) and hooks, instead of the response
// (cdi-allocation; hooks are given only with it). Errors: the allocation's spec could not be
// written.
//
// With cdi-allocation, the cards that have a device <CDIKind>=<UUID> in the runtime's CDI
// registry (NVIDIA's spec with UUID names, or the simulated cards' spec) are named by it
// too, before the allocation's device, and the allocation's spec leaves those cards' device
// nodes or files to it: NVIDIA's edits bring the driver's libraries, which a runtime that
// ignores NVIDIA_VISIBLE_DEVICES from unprivileged containers would not add. The order is
// what keeps the allocation's env final: kubelet passes a response's CDI devices to the CRI
// in order (devicemanager's getCDIDeviceInfo), containerd hands them in that order to one
// InjectDevices call (internal/cri/opts WithCDI), and the CDI library appends each device's
// edits in the order given and applies them at once (Cache.InjectDevices, ContainerEdits.
// Append and Apply), where runtime-tools' AddMultipleProcessEnv replaces a key an earlier
// device of the same call set (NVIDIA's NVIDIA_VISIBLE_DEVICES=void) in place and appends the
// rest after the container's own env, whose last value of a key runc keeps. Copying NVIDIA's
// edits into the allocation's spec instead would freeze them: a driver upgrade regenerates
// NVIDIA's spec, and a container restarting later would get the old libraries' paths.
func (p *Plugin) handOver(c candidate, env map[string]string, cards []gpushare.Device, hooks []*cdi.Hook) (*pluginapi.ContainerAllocateResponse, error) {
	resp := &pluginapi.ContainerAllocateResponse{Envs: env}
	switch p.cfg.DeviceListStrategy {
	case DeviceListCDICRI:
		delete(env, gpushare.EnvVisibleDevices)
		for _, card := range cards {
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: p.cfg.CDIKind + "=" + card.UUID})
		}
	case DeviceListCDIAllocation:
		env[envCUDAVisibleDevices] = env[gpushare.EnvVisibleDevices]
		dirs := p.registryDirs()
		runtimeDevices, own := nodecards.RuntimeCardDevices(dirs, p.cfg.CDIKind, cards)
		p.logRuntimeDevices(dirs, own)
		name, err := p.cardSpecs().WriteAllocationSpec(c.pod.UID, c.cont.Name, own, env, hooks)
		if err != nil {
			return nil, err
		}
		resp.Envs = nil
		for _, d := range append(runtimeDevices, name) {
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: d})
		}
	}
	return resp, nil
}
