package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// leaderLabel keeps gpushare.LabelExtenderLeader on the extender's own pod in line with the
// lease: set while this replica leads, absent otherwise. Patches run on one goroutine and the
// latest wish wins, so a quick lead-then-lose never ends labelled.
type leaderLabel struct {
	client    kubernetes.Interface
	namespace string
	name      string

	mu   sync.Mutex
	want chan bool // capacity 1: the latest wish not yet applied
}

func newLeaderLabel(client kubernetes.Interface, namespace, name string) *leaderLabel {
	return &leaderLabel{client: client, namespace: namespace, name: name, want: make(chan bool, 1)}
}

// set asks for the label to be set (leading) or removed, replacing an older wish.
func (l *leaderLabel) set(leading bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.want:
	default:
	}
	l.want <- leading
}

// run applies wishes until ctx ends, retrying a failed patch every second unless a newer
// wish arrives.
func (l *leaderLabel) run(ctx context.Context) {
	for {
		var leading bool
		select {
		case <-ctx.Done():
			return
		case leading = <-l.want:
		}
		for {
			err := l.patch(ctx, leading)
			if err == nil {
				klog.InfoS("leader label updated", "pod", klog.KRef(l.namespace, l.name), "leading", leading)
				break
			}
			klog.ErrorS(err, "updating the leader label; retrying", "pod", klog.KRef(l.namespace, l.name))
			select {
			case <-ctx.Done():
				return
			case leading = <-l.want:
			case <-time.After(time.Second):
			}
		}
	}
}

func (l *leaderLabel) patch(ctx context.Context, leading bool) error {
	var v any // nil removes the label
	if leading {
		v = "true"
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{gpushare.LabelExtenderLeader: v}}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := l.client.CoreV1().Pods(l.namespace).Patch(ctx, l.name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching pod %s/%s: %w", l.namespace, l.name, err)
	}
	return nil
}
