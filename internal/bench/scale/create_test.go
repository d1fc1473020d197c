package scale

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestCreatePodRetries(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name      string
		errs      []error // answers of the first calls; nil lets the call through
		wantErr   bool
		wantCalls int
	}{
		{"ok at once", nil, false, 1},
		{"timeout then ok", []error{apierrors.NewTimeoutError("slow", 1)}, false, 2},
		{"timeout, then it existed", []error{apierrors.NewServerTimeout(gr, "create", 1), apierrors.NewAlreadyExists(gr, "p")}, false, 2},
		{"permanent error", []error{apierrors.NewForbidden(gr, "p", nil)}, true, 1},
		{"already exists at once is an error", []error{apierrors.NewAlreadyExists(gr, "p")}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			calls := 0
			client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				if calls <= len(tc.errs) && tc.errs[calls-1] != nil {
					return true, nil, tc.errs[calls-1]
				}
				return false, nil, nil
			})
			b := &Bench{Client: client, Objects: DefaultObjects()}
			err := b.createPod(context.Background(), b.Objects.Pod("plain", 0, PodShape{Units: 1, Cards: 1}))
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if calls != tc.wantCalls {
				t.Errorf("%d create calls, want %d", calls, tc.wantCalls)
			}
		})
	}
}
