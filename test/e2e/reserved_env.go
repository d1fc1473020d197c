//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// reservedVar is a variable gpushare-reserved-env refuses, and an envFrom prefix that makes
// it from a ConfigMap key (the name without the prefix).
type reservedVar struct{ name, prefix string }

// reservedVars are the variables through which a container asks the NVIDIA runtime for
// cards, or is told its cards, its grant and its MPS limit.
var reservedVars = []reservedVar{
	{gpushare.EnvVisibleDevices, "NVIDIA_"},
	{"NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_"},
	{cudaVisibleDevices, "CUDA_"},
	{"CUDA_VERSION", "CUDA_"},
	{gpushare.EnvMPSPinnedMemLimit, "CUDA_MPS_"},
	{gpushare.EnvMPSPipeDirectory, "CUDA_MPS_"},
	{gpushare.EnvContainerUnits, "ALIYUN_COM_GPU_MEM_"},
}

// reservedKeys is the ConfigMap a tenant fills with the reserved variables' names as keys:
// admission sees the ConfigMap's name in an envFrom, never its keys.
const reservedKeys = "gpu-vars"

// setReserved makes container c set v: by name in its env, or, byPrefix, by taking
// reservedKeys under v's prefix. It returns what the refusal must say.
func setReserved(c *corev1.Container, v reservedVar, byPrefix bool) string {
	if byPrefix {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{Prefix: v.prefix,
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: reservedKeys}}})
		return `container "` + c.Name + `" takes envFrom under prefix ` + v.prefix + `, which could set `
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: v.name, Value: "all"})
	return `container "` + c.Name + `" sets ` + v.name
}

// CaseReservedEnvTenant: a tenant (the namespace's "edit" role, and kubectl debug's right) is refused, with a message
// naming the variable or the prefix, a pod requesting 1 unit that sets any reserved variable
// in a container, in an init container, by name or by envFrom from a ConfigMap under a prefix
// that makes it; the same in a container it adds to a running pod's spec as kubectl debug does
// (a patch of pods/ephemeralcontainers); and a pod without gpu-mem that sets
// NVIDIA_VISIBLE_DEVICES=all. It may still create a GPU pod taking a ConfigMap by envFrom
// without a prefix (CaseReservedEnvFromConfigMap runs one) and add a plain debug container.
// Dry runs, but for the pod the debug containers are added to, which nothing schedules.
func CaseReservedEnvTenant(t *testing.T, e *Env) {
	ctx := testContext(t, 2*time.Minute)
	requirePolicies(ctx, t, e, reservedEnvPolicy)
	ns := newNamespace(t, e)
	tenant := tenantDebugClient(ctx, t, e, ns)
	createReservedKeys(ctx, t, tenant, ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	noGPU := plainPod(ns, "no-gpu-mem", "")
	noGPU.Spec.Containers[0].Env = []corev1.EnvVar{{Name: gpushare.EnvVisibleDevices, Value: "all"}}
	// The policy's informer may take a moment after cluster-up: wait for its first refusal.
	var err error
	waitErr := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = tenant.CoreV1().Pods(ns).Create(ctx, noGPU, dry)
		return err != nil, nil
	})
	if waitErr != nil {
		t.Fatalf("a tenant created a pod without gpu-mem setting %s=all: the policy %s is not enforced", gpushare.EnvVisibleDevices, reservedEnvPolicy)
	}
	wantRefused(t, "pod without gpu-mem setting "+gpushare.EnvVisibleDevices+"=all", err, `container "c" sets `+gpushare.EnvVisibleDevices)

	target := plainPod(ns, "target", "")
	target.Spec.SchedulerName = "e2e-no-scheduler" // debug containers are judged at admission; nothing needs to run
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, target, metav1.CreateOptions{}); err != nil {
		t.Fatalf("tenant creating a pod to debug: %v", err)
	}
	debug := func(ctx context.Context, c corev1.Container, dryRun bool) error {
		ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c), TargetContainerName: "c"}
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"ephemeralContainers": []corev1.EphemeralContainer{ec}}})
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = tenant.CoreV1().Pods(ns).Patch(ctx, target.Name, types.StrategicMergePatchType, patch, opts, "ephemeralcontainers")
		return err
	}
	container := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: testImage, ImagePullPolicy: corev1.PullNever}
	}

	for _, v := range reservedVars {
		for _, byPrefix := range []bool{false, true} {
			how := "env " + v.name
			if byPrefix {
				how = "envFrom under " + v.prefix
			}
			p := gpuPod(ns, "tenant", "", ctr{units: 1})
			p.Spec.NodeSelector = nil
			want := setReserved(&p.Spec.Containers[0], v, byPrefix)
			_, err := tenant.CoreV1().Pods(ns).Create(ctx, p, dry)
			wantRefused(t, "container: "+how, err, want)

			p = gpuPod(ns, "tenant", "", ctr{units: 1})
			p.Spec.NodeSelector = nil
			p.Spec.InitContainers = []corev1.Container{container("setup")}
			want = setReserved(&p.Spec.InitContainers[0], v, byPrefix)
			_, err = tenant.CoreV1().Pods(ns).Create(ctx, p, dry)
			wantRefused(t, "init container: "+how, err, want)

			c := container("debugger")
			want = setReserved(&c, v, byPrefix)
			wantRefused(t, "kubectl debug container: "+how, debug(ctx, c, true), want)
		}
	}

	p := gpuPod(ns, "tenant", "", ctr{units: 1})
	p.Spec.NodeSelector = nil
	p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{
		ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: reservedKeys}}}}
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, p, dry); err != nil {
		t.Errorf("tenant creating a gpu-mem pod with envFrom %s without a prefix: %v (admission cannot see the keys)", reservedKeys, err)
	}
	if err := debug(ctx, container("debugger"), false); err != nil {
		t.Errorf("tenant adding a debug container that sets nothing reserved: %v", err)
	}
}

// CaseReservedEnvFromConfigMap: what admission cannot see is harmless on a cdi-allocation
// node. On the real node (containerd with CDI, two simulated T4s) labelled
// gpushare.io/isolation=mps, share-plugin handing over with cdi-allocation, a tenant's pod
// requesting 1 unit that takes every reserved variable from a ConfigMap by envFrom without a
// prefix (NVIDIA_VISIBLE_DEVICES=all, CUDA_VISIBLE_DEVICES=0,1, ALIYUN_COM_GPU_MEM_CONTAINER=14,
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=99999M, CUDA_MPS_PIPE_DIRECTORY=/tmp/mine, ...) is
// admitted, runs, and its container sees exactly its card and its grant, each variable once:
// the per-allocation CDI spec's values, which the runtime applies after the pod's env.
func CaseReservedEnvFromConfigMap(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	root, _ := startMPSLauncher(t, e)
	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_DEVICE_LIST_STRATEGY=cdi-allocation", "GPUSHARE_MPS_ROOT="+root)
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationMPS))
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })

	ns := newNamespace(t, e)
	tenant := tenantDebugClient(ctx, t, e, ns)
	createReservedKeys(ctx, t, tenant, ns)
	p := gpuPod(ns, "from-configmap", e.RealNode, ctr{units: 1})
	p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{
		ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: reservedKeys}}}}
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("tenant creating a gpu-mem pod with envFrom %s without a prefix: %v (admission cannot see the keys)", reservedKeys, err)
	}
	p = waitPod(t, e, ns, p.Name, 2*time.Minute, "Running", isRunning)
	dev := onlyCard(t, p, inv)
	logs := containerLogs(t, e, ns, p.Name, "c0")
	t.Logf("the container's GPU environment:\n%s", logs)
	wantEnvOnce(t, logs, map[string]string{
		"GPUSHARE_SIMULATED_GPUS":     dev.UUID,
		gpushare.EnvVisibleDevices:    dev.UUID,
		cudaVisibleDevices:            dev.UUID,
		gpushare.EnvContainerUnits:    "1",
		gpushare.EnvMPSPinnedMemLimit: gpushare.MPSMemLimit(1024),
		gpushare.EnvMPSPipeDirectory:  mpsFolder(t, root, dev.UUID, 1024).Pipe(),
	})
}

// tenantDebugClient is tenantClient's tenant, also allowed to add debug containers in ns
// (pods/ephemeralcontainers, which "edit" does not grant: kubectl debug needs it), once the
// API server's authorizer says it may create ConfigMaps and add debug containers there.
func tenantDebugClient(ctx context.Context, t *testing.T, e *Env, ns string) kubernetes.Interface {
	t.Helper()
	tenant := tenantClient(ctx, t, e, ns)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-tenant-debug", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"},
			Verbs: []string{"get", "patch", "update"}}},
	}
	if _, err := e.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Role %s: %v", role.Name, err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}},
	}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("granting %s kubectl debug in %s: %v", tenantUser, ns, err)
	}
	wants := []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Resource: "configmaps"},
		{Namespace: ns, Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers"},
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, w := range wants {
			r, err := tenant.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
				&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &w}}, metav1.CreateOptions{})
			if err != nil || !r.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s never got %v in %s", tenantUser, wants, ns)
	}
	return tenant
}

// createReservedKeys creates, as the tenant, ConfigMap reservedKeys in ns: every reserved
// variable by its full name, with the values a tenant widening a 1-unit grant would choose,
// and each name without its prefix (what an envFrom under that prefix would make it).
func createReservedKeys(ctx context.Context, t *testing.T, tenant kubernetes.Interface, ns string) {
	t.Helper()
	data := map[string]string{}
	for _, v := range reservedVars {
		data[v.name] = "all"
		data[strings.TrimPrefix(v.name, v.prefix)] = "all"
	}
	for _, kv := range append(envStrings(tenantGPUEnv), gpushare.EnvMPSPinnedMemLimit+"=0=99999M", gpushare.EnvMPSPipeDirectory+"=/tmp/mine") {
		k, v, _ := strings.Cut(kv, "=")
		data[k] = v
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: reservedKeys, Namespace: ns}, Data: data}
	if _, err := tenant.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("tenant creating ConfigMap %s: %v", reservedKeys, err)
	}
}

// envStrings is env as KEY=value strings (values only, not references).
func envStrings(env []corev1.EnvVar) []string {
	out := make([]string, len(env))
	for i, v := range env {
		out[i] = v.Name + "=" + v.Value
	}
	return out
}

// wantEnvOnce fails unless the container log of gpuenv (KEY=value lines) holds each key of
// want exactly once, with its value.
func wantEnvOnce(t *testing.T, logs string, want map[string]string) {
	t.Helper()
	for k, v := range want {
		var got []string
		for _, l := range strings.Split(logs, "\n") {
			if key, val, ok := strings.Cut(l, "="); ok && key == k {
				got = append(got, val)
			}
		}
		if len(got) != 1 || got[0] != v {
			t.Errorf("the container sees %s=%v, want exactly %q (the pod's env set it too); its log:\n%s", k, got, v, logs)
		}
	}
}
