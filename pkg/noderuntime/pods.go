package noderuntime

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podInformer is an informer of the node's pods only: it never holds the whole cluster.
func podInformer(client kubernetes.Interface, nodeName string) (informers.SharedInformerFactory, cache.SharedIndexInformer) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	return factory, factory.Core().V1().Pods().Informer()
}

// Pods is the informer of the node's pods.
func (n *Node) Pods() cache.SharedIndexInformer { return n.cfg.Pods }

// StartPods starts the pod informer New made (nothing when Config.Pods was given) and
// returns its stop, which the caller calls on every return: the informer has its own
// stop because ctx is not done when a back end returns an error, and stop waits for it.
func (n *Node) StartPods(ctx context.Context) (stop func()) {
	if n.factory == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	n.factory.Start(ctx.Done())
	return func() {
		cancel()
		n.factory.Shutdown()
	}
}
