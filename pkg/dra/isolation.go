package dra

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// errNoMPS is why a node labelled gpushare.IsolationMPS enforces nothing on this back end.
var errNoMPS = errors.New("the DRA back end does not run MPS: its claims fail")

// enforcedIsolation is what this back end enforces for the mode a node's label asks:
// limits where the node can enforce them, none for MPS or for limits it cannot enforce
// (with why), as prepare decides (limitUnavailable).
func enforcedIsolation(limitUnsupported error, blocker func() error) func(gpushare.Isolation) (gpushare.Isolation, error) {
	return func(iso gpushare.Isolation) (gpushare.Isolation, error) {
		switch iso {
		case gpushare.IsolationMPS:
			return gpushare.IsolationNone, errNoMPS
		case gpushare.IsolationLimit:
			if why := limitUnavailable(limitUnsupported, blocker); why != nil {
				return gpushare.IsolationNone, why
			}
		}
		return iso, nil
	}
}

// limitUnavailable says why the node cannot enforce gpushare.IsolationLimit: the driver or
// cgroups cannot (limitUnsupported), or the container runtime gives a container cards it was
// not handed, outside any limit (blocker, preflight.IsolationBlocker; nil: not checked). nil:
// it can.
func limitUnavailable(limitUnsupported error, blocker func() error) error {
	if limitUnsupported != nil {
		return limitUnsupported
	}
	if blocker != nil {
		return blocker()
	}
	return nil
}

// isolationLabel publishes the node's gpushare.LabelIsolationEnforced, as the device
// plugin does (nodecards.PublishEnforcedIsolation).
type isolationLabel struct {
	client   kubernetes.Interface
	recorder record.EventRecorder // nil: no events
	node     string
	enforced func(gpushare.Isolation) (gpushare.Isolation, error)
}

// publish labels node; a failure is logged and retried at the next read of the node.
func (l isolationLabel) publish(ctx context.Context, node *corev1.Node) {
	if err := nodecards.PublishEnforcedIsolation(ctx, l.client, l.recorder, node, l.enforced); err != nil {
		klog.ErrorS(err, "Publishing the enforced isolation failed", "node", l.node)
	}
}

// resync reads the node every period and publishes its label, until ctx is done: a label
// changed with no claim prepared is seen too.
func (l isolationLabel) resync(ctx context.Context, clk clock.Clock, period time.Duration) {
	if period <= 0 {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-clk.After(period):
		}
		node, err := l.client.CoreV1().Nodes().Get(ctx, l.node, metav1.GetOptions{})
		if err != nil {
			klog.ErrorS(err, "Reading the node failed", "node", l.node)
			continue
		}
		l.publish(ctx, node)
	}
}
