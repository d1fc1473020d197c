package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// listTimeout bounds one PodResources List call: Allocate runs while kubelet admits a pod,
// so a stuck kubelet endpoint must cost little before the fallback takes over.
const listTimeout = 2 * time.Second

// errNoPodResources means no PodResources socket is configured.
var errNoPodResources = errors.New("no PodResources socket configured")

// kubeletPods is kubelet's view of its pods during an Allocate: per pod ("namespace/name"),
// per listed container (app containers and sidecars), whether it already holds devices of
// the gpu-mem resource. Kubelet adds a pod to its pod manager before admitting it and
// records a container's devices only after Allocate returns, so the pod being admitted is
// the one listed with its gpu-mem container still lacking devices.
type kubeletPods map[string]map[string]bool

// admitting reports whether c's container is the one kubelet is allocating now: the pod is
// listed and the container holds no gpu-mem devices yet. Regular init containers are not
// listed, so for them the pod being listed is all kubelet tells.
func (kp kubeletPods) admitting(c candidate) bool {
	ctrs, ok := kp[c.pod.Namespace+"/"+c.pod.Name]
	if !ok {
		return false
	}
	if c.cont.Kind == gpushare.Init {
		return true
	}
	return !ctrs[c.cont.Name]
}

// listKubeletPods asks kubelet's PodResources API on socket which pods it knows and which of
// their containers already hold mem devices. Errors: errNoPodResources when socket is
// empty, else the failed connection or call.
func listKubeletPods(ctx context.Context, socket string, mem string) (kubeletPods, error) {
	if socket == "" {
		return nil, errNoPodResources
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to kubelet PodResources at %s: %w", socket, err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(cctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing pod resources at %s: %w", socket, err)
	}
	out := kubeletPods{}
	for _, pr := range resp.GetPodResources() {
		ctrs := map[string]bool{}
		for _, c := range pr.GetContainers() {
			has := false
			for _, d := range c.GetDevices() {
				has = has || (d.GetResourceName() == mem && len(d.GetDeviceIds()) > 0)
			}
			ctrs[c.GetName()] = has
		}
		out[pr.GetNamespace()+"/"+pr.GetName()] = ctrs
	}
	return out, nil
}
