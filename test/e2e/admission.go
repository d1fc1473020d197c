//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The admission policies of deploy/admission, which hack/cluster-up.sh applies.
const (
	allocationPolicy    = "gpushare-allocation-annotations"
	nodeScopePolicy     = "gpushare-share-plugin-node-scope"
	selfPlacementPolicy = "gpushare-self-placement"
	// refusedSelfPlacement starts the self-placement policy's refusal message.
	refusedSelfPlacement = "only the gpushare scheduler and admins may place a pod that requests"
	// refusedAllocation starts the allocation policy's refusal message.
	refusedAllocation = "only the gpushare extender, gpushare-scheduler and share-plugin may"
	// e2eAnnotation is a key no policy protects: writing it tests who may write the object.
	e2eAnnotation = "e2e.gpushare.io/touched"
)

// CaseAdmissionTenantAllocation: a tenant (a user with the namespace "edit" role) cannot
// set, change or remove a pod's allocation annotations, neither on a pod it creates nor on a
// bound one, and is told why; it can still write the pod's other annotations. A cluster
// admin (system:masters) can write them.
func CaseAdmissionTenantAllocation(t *testing.T, e *Env) {
	ctx := testContext(t, 2*time.Minute)
	requirePolicies(ctx, t, e)
	ns := newNamespace(t, e)
	tenant := tenantClient(ctx, t, e, ns)

	// The admin writes a pod as the extender would have bound it; nothing schedules it.
	p := plainPod(ns, "bound", "")
	p.Spec.SchedulerName = "e2e-no-scheduler"
	p.Annotations = map[string]string{
		gpushare.AnnotationAllocation: `{"0":{"0":2}}`,
		gpushare.AnnotationPodUnits:   "2",
		gpushare.AnnotationIndex:      "0",
		gpushare.AnnotationAssigned:   "false",
	}
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creating a pod with allocation annotations: %v (cluster admins are trusted)", err)
	}

	// The policy's informer may take a moment after cluster-up: wait for its first refusal.
	patch := mergePatch(map[string]any{gpushare.AnnotationAllocation: `{"0":{"1":2}}`})
	var err error
	waitErr := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = tenant.CoreV1().Pods(ns).Patch(ctx, "bound", types.MergePatchType, patch, metav1.PatchOptions{})
		return err != nil, nil
	})
	if waitErr != nil {
		t.Fatalf("a tenant changed the pod's allocation annotation: the policy %s is not enforced", allocationPolicy)
	}
	wantRefused(t, "tenant changing "+gpushare.AnnotationAllocation, err, refusedAllocation)

	tests := []struct {
		name  string
		patch map[string]any
		want  string // "" admits
	}{
		{"tenant removes " + gpushare.AnnotationIndex, map[string]any{gpushare.AnnotationIndex: nil}, refusedAllocation},
		{"tenant adds " + gpushare.AnnotationAllocated, map[string]any{gpushare.AnnotationAllocated: "app/0"}, refusedAllocation},
		{"tenant sets another annotation", map[string]any{e2eAnnotation: "tenant"}, ""},
	}
	for _, tc := range tests {
		_, err := tenant.CoreV1().Pods(ns).Patch(ctx, "bound", types.MergePatchType, mergePatch(tc.patch), metav1.PatchOptions{})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		wantRefused(t, tc.name, err, tc.want)
	}

	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	withAlloc := plainPod(ns, "copy", "")
	withAlloc.Annotations = map[string]string{gpushare.AnnotationIndex: "0"}
	_, err = tenant.CoreV1().Pods(ns).Create(ctx, withAlloc, dry)
	wantRefused(t, "tenant creating a pod with "+gpushare.AnnotationIndex, err, "create the pod without them")
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, plainPod(ns, "plain", ""), dry); err != nil {
		t.Errorf("tenant creating a pod without allocation annotations: %v", err)
	}

	got, err := e.Client.CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[gpushare.AnnotationAllocation] != `{"0":{"0":2}}` || got.Annotations[gpushare.AnnotationIndex] != "0" {
		t.Errorf("allocation annotations changed by refused writes: %v", got.Annotations)
	}
}

// CaseAdmissionSelfPlacement: a tenant may not create a gpu-mem pod with spec.nodeName (it
// would count on every card of that node); without spec.nodeName it may, and a cluster
// admin may either way. Dry-run creates: nothing is placed.
func CaseAdmissionSelfPlacement(t *testing.T, e *Env) {
	ctx := testContext(t, 2*time.Minute)
	requirePolicies(ctx, t, e, selfPlacementPolicy)
	ns := newNamespace(t, e)
	tenant := tenantClient(ctx, t, e, ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	placed := gpuPod(ns, "placed", "", ctr{units: 4})
	placed.Spec.NodeSelector = nil
	placed.Spec.NodeName = "gpu-e2e-any"

	// The policy's informer may take a moment after cluster-up: wait for its first refusal.
	var err error
	waitErr := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = tenant.CoreV1().Pods(ns).Create(ctx, placed, dry)
		return err != nil, nil
	})
	if waitErr != nil {
		t.Fatalf("a tenant created a gpu-mem pod with spec.nodeName: the policy %s is not enforced", selfPlacementPolicy)
	}
	wantRefused(t, "tenant creating a gpu-mem pod with spec.nodeName", err, refusedSelfPlacement)
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "scheduled", "", ctr{units: 4}), dry); err != nil {
		t.Errorf("tenant creating a gpu-mem pod left to the scheduler: %v", err)
	}
	if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, placed, dry); err != nil {
		t.Errorf("cluster admin creating a gpu-mem pod with spec.nodeName: %v (admins are trusted)", err)
	}
}

// CaseAdmissionSharePluginNodeScope: a share-plugin token bound to a pod on node A (as
// kubelet projects it) may annotate node A and the pods bound to it, and is refused node B,
// node B's status and node B's pods; a share-plugin token bound to no pod may write nothing.
func CaseAdmissionSharePluginNodeScope(t *testing.T, e *Env) {
	ctx := testContext(t, 3*time.Minute)
	requirePolicies(ctx, t, e)
	applySharePluginRBAC(ctx, t, e)
	nodeA := newKwokNode(t, e, "adm-a", card{"Tesla-T4", 15360})
	nodeB := newKwokNode(t, e, "adm-b", card{"Tesla-T4", 15360})
	ns := newNamespace(t, e)
	for _, p := range []*corev1.Pod{plainPod(ns, "on-a", nodeA), plainPod(ns, "on-b", nodeB)} {
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, p.Name, err)
		}
	}
	onA := sharePluginClient(ctx, t, e, nodeA)

	annotate := mergePatch(map[string]any{e2eAnnotation: "share-plugin"})
	status := []byte(`{"status":{"capacity":{"` + string(gpushare.DefaultCountResource) + `":"1"}}}`)
	tests := []struct {
		name  string
		write func(ctx context.Context) error
		want  string // "" admits
	}{
		{"annotate its node " + nodeA, func(ctx context.Context) error {
			_, err := onA.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, annotate, metav1.PatchOptions{})
			return err
		}, ""},
		{"patch its node's status", func(ctx context.Context) error {
			_, err := onA.CoreV1().Nodes().PatchStatus(ctx, nodeA, status)
			return err
		}, ""},
		{"annotate a pod on its node", func(ctx context.Context) error {
			_, err := onA.CoreV1().Pods(ns).Patch(ctx, "on-a", types.MergePatchType, annotate, metav1.PatchOptions{})
			return err
		}, ""},
		{"annotate node " + nodeB, func(ctx context.Context) error {
			_, err := onA.CoreV1().Nodes().Patch(ctx, nodeB, types.MergePatchType, annotate, metav1.PatchOptions{})
			return err
		}, fmt.Sprintf("share-plugin of node %s may not write node %s", nodeA, nodeB)},
		{"patch node B's status", func(ctx context.Context) error {
			_, err := onA.CoreV1().Nodes().PatchStatus(ctx, nodeB, status)
			return err
		}, "may not write node " + nodeB},
		{"annotate a pod on node B", func(ctx context.Context) error {
			_, err := onA.CoreV1().Pods(ns).Patch(ctx, "on-b", types.MergePatchType, annotate, metav1.PatchOptions{})
			return err
		}, fmt.Sprintf("may not write pod %s/on-b of node %s", ns, nodeB)},
	}
	for _, tc := range tests {
		err := tc.write(ctx)
		if tc.want == "" {
			if err != nil {
				t.Errorf("share-plugin of %s: %s: %v", nodeA, tc.name, err)
			}
			continue
		}
		wantRefused(t, "share-plugin of "+nodeA+": "+tc.name, err, tc.want)
	}

	unbound := sharePluginClient(ctx, t, e, "")
	_, err := unbound.CoreV1().Nodes().Patch(ctx, nodeA, types.MergePatchType, annotate, metav1.PatchOptions{})
	wantRefused(t, "share-plugin token bound to no pod", err, "credentials name no node")
}

// requirePolicies fails the test unless cluster-up installed the allocation and node-scope
// policies, and those named in more, with their bindings.
func requirePolicies(ctx context.Context, t *testing.T, e *Env, more ...string) {
	t.Helper()
	for _, name := range append([]string{allocationPolicy, nodeScopePolicy}, more...) {
		p, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("policy %s (deploy/admission, applied by hack/cluster-up.sh): %v", name, err)
		}
		if _, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("policy binding %s: %v", name, err)
		}
		if tc := p.Status.TypeChecking; tc != nil {
			for _, w := range tc.ExpressionWarnings {
				t.Logf("policy %s: type checking %s: %s", name, w.FieldRef, w.Warning)
			}
		}
	}
}

// tenantUser is the user tenantClient impersonates.
const tenantUser = "e2e-tenant"

// tenantClient impersonates a user who holds the built-in "edit" role in ns only.
func tenantClient(ctx context.Context, t *testing.T, e *Env, ns string) kubernetes.Interface {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant-edit", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}},
	}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("granting %s edit in %s: %v", tenantUser, ns, err)
	}
	cfg := rest.CopyConfig(e.Rest)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantUser, Groups: []string{"system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The API server's authorizer learns the binding from its own watch: until then the
	// tenant is refused by RBAC, not by the admission policy a case means to test.
	canCreate := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}}}
	waitFor(ctx, t, 30*time.Second, "RBAC to let "+tenantUser+" create pods in "+ns, func() bool {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, canCreate, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
	return c
}

// applySharePluginRBAC installs deploy/share-plugin/rbac.yaml (the local cluster runs
// share-plugin as admin), so that RBAC lets the share-plugin account's writes through and
// only the admission policy decides; removed at the end of the test.
func applySharePluginRBAC(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	for _, obj := range decodeObjects(t, filepath.Join(e.Repo(), "deploy", "share-plugin", "rbac.yaml")) {
		if err := serverSideApply(ctx, e, obj, false); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "gpushare:share-plugin", metav1.DeleteOptions{})
		_ = e.Client.RbacV1().ClusterRoles().Delete(ctx, "gpushare:share-plugin", metav1.DeleteOptions{})
		_ = e.Client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Delete(ctx, "share-plugin", metav1.DeleteOptions{})
	})
}

// sharePluginClient authenticates as kube-system/share-plugin with a fresh token. With node
// set, the token is bound to a pod of that account on that node, as the token kubelet
// projects into share-plugin's pod: the API server then adds the node to the caller's
// identity. Without, the token is bound to nothing.
func sharePluginClient(ctx context.Context, t *testing.T, e *Env, node string) kubernetes.Interface {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(600))}}
	if node != "" {
		p := plainPod(metav1.NamespaceSystem, "e2e-share-plugin-"+rand.String(5), node)
		p.Spec.ServiceAccountName = "share-plugin"
		p, err := e.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating a share-plugin pod on %s: %v", node, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			zero := int64(0)
			_ = e.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}
	}
	tr, err := e.Client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, "share-plugin", req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a share-plugin token (node %q): %v", node, err)
	}
	cfg := rest.AnonymousClientConfig(e.Rest)
	cfg.BearerToken = tr.Status.Token
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// plainPod is a pod without GPU requests, bound to node when node is set.
func plainPod(ns, name, node string) *corev1.Pod {
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "c", Image: testImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
}

// mergePatch is a JSON merge patch of metadata.annotations (nil values delete).
func mergePatch(ann map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}}) // strings and nils: cannot fail
	return b
}

// wantRefused fails unless err is a 403 whose message contains want.
func wantRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: admitted, want refused with %q", what, want)
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: %v, want 403 Forbidden with %q", what, err, want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%s: refused with %q, want a message containing %q", what, err, want)
	}
}

func ptrTo[T any](v T) *T { return &v }
