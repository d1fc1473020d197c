package noderuntime

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CheckBackend reads the node and refuses it when its gpushare.LabelBackend names another
// back end than want (gpushare.CheckBackend); it returns the node it read. Errors: the
// node cannot be read, or its label is invalid or names another back end.
func (n *Node) CheckBackend(ctx context.Context, want gpushare.Backend) (*corev1.Node, error) {
	node, err := n.cfg.Client.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", n.cfg.Name, err)
	}
	if err := gpushare.CheckBackend(node.Labels, want); err != nil {
		return nil, err
	}
	return node, nil
}
