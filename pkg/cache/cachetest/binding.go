package cachetest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// ReactToBindings makes client's pods/binding creates do what the API server does (see
// ApplyBinding). Add it before informers on client start listing: the fake clientset's
// reactor chain is not safe to change while it serves calls.
func ReactToBindings(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		return true, b, ApplyBinding(client, b)
	})
}

// ApplyBinding does what the API server does for a Binding: it sets the pod's nodeName and
// copies the Binding's annotations onto it, or answers 409 for a pod already bound or of
// another UID than the Binding's.
func ApplyBinding(client *fake.Clientset, b *corev1.Binding) error {
	obj, err := client.Tracker().Get(podsGVR, b.Namespace, b.Name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if pod.Spec.NodeName != "" {
		return apierrors.NewConflict(podsGVR.GroupResource(), b.Name,
			fmt.Errorf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
	}
	if b.UID != "" && b.UID != pod.UID {
		return apierrors.NewConflict(podsGVR.GroupResource(), b.Name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", b.UID, pod.UID))
	}
	for k, v := range b.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	pod.Spec.NodeName = b.Target.Name
	pod.Status.Phase = corev1.PodRunning
	return client.Tracker().Update(podsGVR, pod, b.Namespace)
}
