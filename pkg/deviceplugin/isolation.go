package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// mpsDirs are the host folders of one card's MPS control daemon.
type mpsDirs struct {
	pipe, log, shm, ready string
}

func (p *Plugin) mpsDirs(uuid string) mpsDirs {
	d := filepath.Join(p.cfg.MPSRoot, uuid)
	return mpsDirs{
		pipe: filepath.Join(d, "pipe"), log: filepath.Join(d, "log"), shm: filepath.Join(d, "shm"),
		ready: filepath.Join(d, gpushare.MPSReadyFile),
	}
}

// nodeIsolation reads the node's isolation label from the API server. Allocate asks on every
// call rather than keeping a watch: it is called once per container start, a GET of one node
// is cheap next to the pod patch Allocate makes anyway, and a relabelled node then applies to
// the very next container, with nothing to go stale. labelErr: the label's value is invalid
// (gpushare.ParseIsolation's error, naming the label); err: the node could not be read.
func (p *Plugin) nodeIsolation(ctx context.Context) (iso gpushare.Isolation, labelErr, err error) {
	node, err := p.cfg.Client.CoreV1().Nodes().Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("reading node %s for its %s label: %w", p.cfg.NodeName, gpushare.LabelIsolation, err)
	}
	iso, labelErr = gpushare.NodeIsolation(node.Labels)
	return iso, labelErr, nil
}

// isolationRefusal checks pod m against the node's isolation mode iso (isoErr: its label is
// invalid) before any card is chosen: nil, or the refusal to send to kubelet and the pod.
func (p *Plugin) isolationRefusal(m match, iso gpushare.Isolation, isoErr error) *refusal {
	if isoErr != nil {
		// Fail closed: an administrator's typo must not silently run pods unisolated.
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: node %s's isolation is unknown: %v",
			m.cont.Name, klog.KObj(m.pod), p.cfg.NodeName, isoErr)}
	}
	if err := iso.Admits(m.req); err != nil {
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: %v", m.cont.Name, klog.KObj(m.pod), err)}
	}
	return nil
}

// mpsResponse is what a container on card c holding units gpu-mem units there needs to run
// as a client of c's MPS control daemon: the pinned device-memory limit of its grant, the
// daemon's pipe and log folders (environment and mounts, at the host paths, so the paths the
// daemon and its clients use are the same in every mount namespace) and the card's MPS shared
// memory as /dev/shm. Errors (*refusal): the container is not on exactly one card, or the
// card's daemon has not said it is ready: a container started without a daemon would run
// unlimited.
func (p *Plugin) mpsResponse(m match, cards []gpushare.Device, units []int64) (map[string]string, []*pluginapi.Mount, error) {
	if len(cards) != 1 {
		return nil, nil, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: node isolates cards with MPS (%s=%s), which serves one card per container, and the container has %d",
			m.cont.Name, klog.KObj(m.pod), gpushare.LabelIsolation, gpushare.IsolationMPS, len(cards))}
	}
	c := cards[0]
	dirs := p.mpsDirs(c.UUID)
	if _, err := os.Stat(dirs.ready); err != nil {
		why := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			why = dirs.ready + " does not exist"
		}
		return nil, nil, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: the MPS daemon of card %d (%s) is not ready (%s); is deploy/mps running on node %s?",
			m.cont.Name, klog.KObj(m.pod), c.Index, c.UUID, why, p.cfg.NodeName)}
	}
	env := map[string]string{
		// The container sees its one card as device 0, whatever its index on the node.
		gpushare.EnvMPSPinnedMemLimit: gpushare.MPSMemLimit(units[0] * p.cfg.Unit.MiB),
		gpushare.EnvMPSPipeDirectory:  dirs.pipe,
		gpushare.EnvMPSLogDirectory:   dirs.log,
	}
	mounts := []*pluginapi.Mount{
		{ContainerPath: dirs.pipe, HostPath: dirs.pipe},
		{ContainerPath: dirs.log, HostPath: dirs.log, ReadOnly: true},
		// MPS clients and their server exchange data through POSIX shared memory, so the
		// container's /dev/shm is the one of the card's daemon (NVIDIA's device plugin mounts
		// its daemon's the same way).
		{ContainerPath: "/dev/shm", HostPath: dirs.shm},
	}
	return env, mounts, nil
}
