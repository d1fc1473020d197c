package binding_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
)

// Read-backs for a pod after its Binding failed (api.readBack).
func boundTo(node string, withSent bool) func(*corev1.Pod, *corev1.Binding) (*corev1.Pod, error) {
	return func(p *corev1.Pod, sent *corev1.Binding) (*corev1.Pod, error) {
		p.Spec.NodeName = node
		if withSent {
			p.Annotations = sent.Annotations
		}
		return p, nil
	}
}

// boundWithOtherCards: bound to node by another bind of the pod, whose annotations differ
// from those sent in one value.
func boundWithOtherCards(node string) func(*corev1.Pod, *corev1.Binding) (*corev1.Pod, error) {
	return func(p *corev1.Pod, sent *corev1.Binding) (*corev1.Pod, error) {
		p.Spec.NodeName = node
		p.Annotations = map[string]string{}
		for k, v := range sent.Annotations {
			p.Annotations[k] = v
		}
		p.Annotations[gpushare.AnnotationAllocation] = `{"0":{"0":7}}`
		return p, nil
	}
}

// boundAndServed: bound to node with the cards sent, and already served by the node's
// device plugin, which set ASSIGNED=true and its progress annotation.
func boundAndServed(node string) func(*corev1.Pod, *corev1.Binding) (*corev1.Pod, error) {
	return func(p *corev1.Pod, sent *corev1.Binding) (*corev1.Pod, error) {
		p, _ = boundTo(node, true)(p, sent)
		p.Annotations = maps.Clone(p.Annotations)
		p.Annotations[gpushare.AnnotationAssigned] = "true"
		p.Annotations[gpushare.AnnotationAllocated] = "0"
		return p, nil
	}
}

func readFails(err error) func(*corev1.Pod, *corev1.Binding) (*corev1.Pod, error) {
	return func(*corev1.Pod, *corev1.Binding) (*corev1.Pod, error) { return nil, err }
}

func recreated(p *corev1.Pod, _ *corev1.Binding) (*corev1.Pod, error) {
	p.UID = "uid-new"
	return p, nil
}

// A failed Binding is settled by reading the pod back: bound to this node with the cards
// sent, it landed (nil error, cards kept); gone, re-created or bound any other way, it was
// refused (cards released); unbound, it was refused only when the API server refused the
// call itself, else its outcome is unknown and the cards stay held, as they do when the
// read-back fails.
func TestFailedBindingIsSettledByReadingThePodBack(t *testing.T) {
	gr := podsGVR.GroupResource()
	timeout := apierrors.NewTimeoutError("request timed out", 1) // 504
	tests := []struct {
		name      string
		bindErr   error
		readBack  func(*corev1.Pod, *corev1.Binding) (*corev1.Pod, error) // nil: the stored, unbound pod
		wantLabel string                                                  // "": Bind succeeds
		wantMsg   string                                                  // in the error
		wantHold  string
	}{
		{
			name: "bound to this node with the cards sent: landed", bindErr: timeout,
			readBack: boundTo("n1", true), wantHold: landed,
		},
		{
			name: "bound to this node with the cards sent and already served there: landed", bindErr: timeout,
			readBack: boundAndServed("n1"), wantHold: landed,
		},
		{
			name: "bound to this node with other cards: refused", bindErr: timeout,
			readBack: boundWithOtherCards("n1"), wantLabel: metrics.BindBinding,
			wantMsg: "(pod is bound to node n1 without this allocation; reservation released)", wantHold: released,
		},
		{
			name: "bound to this node without annotations: refused", bindErr: timeout,
			readBack: boundTo("n1", false), wantLabel: metrics.BindBinding,
			wantMsg: "(pod is bound to node n1 without this allocation; reservation released)", wantHold: released,
		},
		{
			name: "bound to another node, even with the cards sent: refused", bindErr: timeout,
			readBack: boundTo("n2", true), wantLabel: metrics.BindBinding,
			wantMsg: "(pod is bound to node n2 without this allocation; reservation released)", wantHold: released,
		},
		{
			name: "pod deleted: refused", bindErr: timeout,
			readBack: readFails(apierrors.NewNotFound(gr, "p")), wantLabel: metrics.BindBinding,
			wantMsg: "(pod deleted; reservation released)", wantHold: released,
		},
		{
			name: "pod re-created: refused", bindErr: timeout,
			readBack: recreated, wantLabel: metrics.BindBinding,
			wantMsg: "(pod re-created with UID uid-new; reservation released)", wantHold: released,
		},
		{
			name: "read-back fails: unknown, cards held", bindErr: timeout,
			readBack: readFails(apierrors.NewInternalError(errors.New("etcd down"))), wantLabel: metrics.BindUnknown,
			wantMsg: "; outcome unknown, reading the pod back failed: Internal error occurred: etcd down", wantHold: unknown,
		},
		// Unbound: whether the call was refused decides.
		{name: "unbound after 400: refused", bindErr: apierrors.NewBadRequest("bad"), wantLabel: metrics.BindBinding, wantMsg: "(pod not bound; reservation released)", wantHold: released},
		{name: "unbound after 403: refused", bindErr: apierrors.NewForbidden(gr, "p", errors.New("admission says no")), wantLabel: metrics.BindBinding, wantMsg: "(pod not bound; reservation released)", wantHold: released},
		{name: "unbound after 404: refused", bindErr: apierrors.NewNotFound(gr, "p"), wantLabel: metrics.BindBinding, wantMsg: "(pod not bound; reservation released)", wantHold: released},
		{name: "unbound after 409: refused", bindErr: apierrors.NewConflict(gr, "p", errors.New("uid precondition")), wantLabel: metrics.BindBinding, wantMsg: "(pod not bound; reservation released)", wantHold: released},
		{name: "unbound after 410: refused", bindErr: apierrors.NewGone("gone"), wantLabel: metrics.BindBinding, wantMsg: "(pod not bound; reservation released)", wantHold: released},
		{name: "unbound after 422: refused", bindErr: apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), "p", field.ErrorList{field.Required(field.NewPath("target"), "")}), wantLabel: metrics.BindBinding, wantMsg: "(pod not bound; reservation released)", wantHold: released},
		{name: "unbound after 504 timeout: unknown, cards held", bindErr: timeout, wantLabel: metrics.BindUnknown, wantMsg: "; outcome unknown, pod not bound yet", wantHold: unknown},
		{name: "unbound after 500 server timeout: unknown, cards held", bindErr: apierrors.NewServerTimeout(gr, "create", 1), wantLabel: metrics.BindUnknown, wantMsg: "; outcome unknown, pod not bound yet", wantHold: unknown},
		{name: "unbound after 500: unknown, cards held", bindErr: apierrors.NewInternalError(errors.New("boom")), wantLabel: metrics.BindUnknown, wantMsg: "; outcome unknown, pod not bound yet", wantHold: unknown},
		{name: "unbound after 429: unknown, cards held", bindErr: apierrors.NewTooManyRequests("slow down", 1), wantLabel: metrics.BindUnknown, wantMsg: "; outcome unknown, pod not bound yet", wantHold: unknown},
		{name: "unbound after a transport error: unknown, cards held", bindErr: errors.New("connection reset by peer"), wantLabel: metrics.BindUnknown, wantMsg: "; outcome unknown, pod not bound yet", wantHold: unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 6, 0)
			e := newEnv(t, &api{bindErrs: []error{tc.bindErr}, readBack: tc.readBack}, node("n1", 16), node("n2", 16), p)
			err := e.bind(context.Background(), t, p, "n1")
			if tc.wantLabel == "" {
				if err != nil {
					t.Errorf("Bind: %v, want nil", err)
				}
			} else {
				be := asError(t, err)
				if be.Label != tc.wantLabel || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("Bind: %q label %q,\nwant %q label %q", err, be.Label, tc.wantMsg, tc.wantLabel)
				}
				if !strings.HasPrefix(err.Error(), "binding pod default/p to n1: ") || !errors.Is(err, tc.bindErr) {
					t.Errorf("Bind: %q does not wrap the Binding's error %q", err, tc.bindErr)
				}
			}
			if n := e.count("get", ""); n != 1 {
				t.Errorf("%d pod reads, want 1", n)
			}
			if got := e.hold(t, p); got != tc.wantHold {
				t.Errorf("hold %s, want %s", got, tc.wantHold)
			}
		})
	}
}
