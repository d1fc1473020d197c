package cache

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

var podCmp = []cmp.Option{
	cmp.AllowUnexported(Pod{}, objectMeta{}, cardUse{}),
	cmpopts.IgnoreFields(Pod{}, "rare"), // compared as strings
}

// bindKeyBits is the bindKeys mask of the given keys.
func bindKeyBits(t *testing.T, keys ...string) uint16 {
	t.Helper()
	var bits uint16
	for _, k := range keys {
		i := indexOf(gpushare.BindAnnotationKeys(), k)
		if i < 0 {
			t.Fatalf("%s is not a bind annotation key", k)
		}
		bits |= 1 << i
	}
	return bits
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func gpuLimits(mem, count string) corev1.ResourceRequirements {
	res := gpushare.DefaultResources()
	l := corev1.ResourceList{res.Mem: resource.MustParse(mem)}
	if count != "" {
		l[res.Count] = resource.MustParse(count)
	}
	return corev1.ResourceRequirements{Limits: l}
}

func TestNewPodKeepsWhatTheCacheAndBindRead(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	meta := metav1.ObjectMeta{
		Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
		Labels:        map[string]string{"app": "x"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
	withAnn := func(ann map[string]string) metav1.ObjectMeta {
		m := *meta.DeepCopy()
		m.Annotations = ann
		return m
	}
	id := objectMeta{name: "p", namespace: "ns", uid: "u", resourceVersion: "7"}
	main4 := gpushare.ContainerRequest{Ref: gpushare.ContainerRef{Index: 0}, Name: "main", Kind: gpushare.App, Units: 4, Cards: 1}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		want     *Pod
		reqErr   string // substring of the request error; "" for none
		allocErr string // substring of the allocation error; "" for none
	}{{
		name: "placed pod: identity, node, scheduler, request, card usage and which bind annotations it carries",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{
				gpushare.AnnotationAllocation: `{"0":{"1":4}}`, gpushare.AnnotationPodUnits: "4",
				gpushare.AnnotationAssigned: "true", "kubectl.kubernetes.io/last-applied-configuration": "{…big…}",
			}),
			Spec: corev1.PodSpec{NodeName: "n1", SchedulerName: "gpu-scheduler", Containers: []corev1.Container{{Name: "main", Image: "img",
				Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Resources: gpuLimits("4", "")}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		},
		want: &Pod{objectMeta: id, nodeName: "n1", schedulerName: "gpu-scheduler", recorded: true,
			bindKeys:   bindKeyBits(t, gpushare.AnnotationAllocation, gpushare.AnnotationPodUnits, gpushare.AnnotationAssigned),
			containers: []gpushare.ContainerRequest{main4},
			usage:      cardUsage{{card: 1, units: 4}}},
	}, {
		name: "older extender's single-card annotation: every gpu-mem container on that card",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationIndex: "2"}),
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
				{Name: "main", Resources: gpuLimits("4", "")}, {Name: "second", Resources: gpuLimits("3", "")}}},
		},
		// 4 + 3 = 7 units on card 2.
		want: &Pod{objectMeta: id, nodeName: "n1", recorded: true, bindKeys: bindKeyBits(t, gpushare.AnnotationIndex),
			containers: []gpushare.ContainerRequest{main4,
				{Ref: gpushare.ContainerRef{Index: 1}, Name: "second", Kind: gpushare.App, Units: 3, Cards: 1}},
			usage: cardUsage{{card: 2, units: 7}}},
	}, {
		name: "sidecar and init container: usage follows the effective-request rule per card",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{
				gpushare.AnnotationAllocation:     `{"0":{"0":4}}`,
				gpushare.AnnotationInitAllocation: `{"0":{"0":2},"1":{"0":8,"3":8}}`,
			}),
			Spec: corev1.PodSpec{NodeName: "n1",
				InitContainers: []corev1.Container{
					{Name: "side", RestartPolicy: &always, Resources: gpuLimits("2", "")},
					{Name: "init", Resources: gpuLimits("16", "2")}},
				Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("4", "")}}},
		},
		// Card 0: running app 4 + sidecar 2 = 6; the init runs beside the sidecar: 8 + 2 = 10
		// → 10. Card 3: only the init's 8.
		want: &Pod{objectMeta: id, nodeName: "n1", recorded: true,
			bindKeys: bindKeyBits(t, gpushare.AnnotationAllocation, gpushare.AnnotationInitAllocation),
			containers: []gpushare.ContainerRequest{
				{Ref: gpushare.ContainerRef{InitList: true, Index: 0}, Name: "side", Kind: gpushare.Sidecar, Units: 2, Cards: 1},
				{Ref: gpushare.ContainerRef{InitList: true, Index: 1}, Name: "init", Kind: gpushare.Init, Units: 16, Cards: 2},
				main4},
			usage: cardUsage{{card: 0, units: 10}, {card: 3, units: 8}}},
	}, {
		name: "an entry naming no card for a container without gpu-mem names nothing: the record is valid",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationAllocation: `{"0":{"1":4},"1":{}}`}),
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
				{Name: "main", Resources: gpuLimits("4", "")}, {Name: "cpu"}}},
		},
		want: &Pod{objectMeta: id, nodeName: "n1", recorded: true, bindKeys: bindKeyBits(t, gpushare.AnnotationAllocation),
			containers: []gpushare.ContainerRequest{main4},
			usage:      cardUsage{{card: 1, units: 4}}},
	}, {
		name: "pending pod: request only",
		pod: &corev1.Pod{ObjectMeta: meta,
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("4", "")}}}},
		want: &Pod{objectMeta: id, containers: []gpushare.ContainerRequest{main4}},
	}, {
		name: "invalid gpu-mem value: the error is kept, annotations recorded but give no usage (nothing to check them against)",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":5}}`}),
			Spec: corev1.PodSpec{NodeName: "n1",
				Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("5", "2")}}},
		},
		want:   &Pod{objectMeta: id, nodeName: "n1", recorded: true, bindKeys: bindKeyBits(t, gpushare.AnnotationAllocation)},
		reqErr: `container "main": aliyun.com/gpu-mem 5 is not divisible by aliyun.com/gpu-count 2`,
	}, {
		name: "negative gpu-mem",
		pod: &corev1.Pod{ObjectMeta: meta,
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("-1", "")}}}},
		want:   &Pod{objectMeta: id},
		reqErr: "is negative",
	}, {
		name: "malformed allocation annotation: recorded, no usage, the error is kept",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationAllocation: `{not json`}),
			Spec: corev1.PodSpec{NodeName: "n1",
				Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("4", "")}}},
		},
		want: &Pod{objectMeta: id, nodeName: "n1", recorded: true, bindKeys: bindKeyBits(t, gpushare.AnnotationAllocation),
			containers: []gpushare.ContainerRequest{main4}},
		allocErr: "decoding allocation",
	}, {
		name: "allocation not matching the request: recorded, no usage, the error names the rule",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":0}}`}),
			Spec: corev1.PodSpec{NodeName: "n1",
				Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("4", "")}}},
		},
		want: &Pod{objectMeta: id, nodeName: "n1", recorded: true, bindKeys: bindKeyBits(t, gpushare.AnnotationAllocation),
			containers: []gpushare.ContainerRequest{main4}},
		allocErr: `allocation does not match the gpu-mem request: container "main" (app/0): allocation holds 0 units on card 0, the request wants 4 per card`,
	}, {
		name: "terminal pod",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationAllocation: `{"0":{"1":4}}`}),
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Resources: gpuLimits("4", "")}}},
			Status:     corev1.PodStatus{Phase: corev1.PodFailed},
		},
		want: &Pod{objectMeta: id, nodeName: "n1", terminal: true, recorded: true,
			bindKeys:   bindKeyBits(t, gpushare.AnnotationAllocation),
			containers: []gpushare.ContainerRequest{main4},
			usage:      cardUsage{{card: 1, units: 4}}},
	}, {
		name: "pod without gpu-mem: its annotations are not read (the cache never accounts it)",
		pod: &corev1.Pod{
			ObjectMeta: withAnn(map[string]string{gpushare.AnnotationAllocation: `{not json`}),
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main"}}},
			Status:     corev1.PodStatus{Phase: corev1.PodSucceeded},
		},
		want: &Pod{objectMeta: id, nodeName: "n1", terminal: true, bindKeys: bindKeyBits(t, gpushare.AnnotationAllocation)},
	}}
	res := gpushare.DefaultResources()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			got := NewPod(tc.pod, res)
			if diff := cmp.Diff(tc.want, got, podCmp...); diff != "" {
				t.Errorf("slim pod (-want,+got):\n%s", diff)
			}
			checkErr(t, "request", tc.reqErr, got.requestErr())
			checkErr(t, "allocation", tc.allocErr, got.allocErr())
			if diff := cmp.Diff(before, tc.pod); diff != "" {
				t.Errorf("NewPod modified its input (-before,+after):\n%s", diff)
			}
			// Bind reads these through the exported methods.
			req, err := got.Request()
			wantReq, wantErr := res.PodRequest(tc.pod)
			if diff := cmp.Diff(wantReq, req); diff != "" || (err == nil) != (wantErr == nil) {
				t.Errorf("Request() = %v, %v; want %v, %v", req, err, wantReq, wantErr)
			}
			var wantKeys []string
			for _, k := range gpushare.BindAnnotationKeys() {
				if _, has := tc.pod.Annotations[k]; has {
					wantKeys = append(wantKeys, k)
				}
			}
			if diff := cmp.Diff(wantKeys, got.BindAnnotationKeys()); diff != "" {
				t.Errorf("BindAnnotationKeys (-want,+got):\n%s", diff)
			}
			if got.GetName() != "p" || got.GetNamespace() != "ns" || got.GetUID() != "u" || got.GetResourceVersion() != "7" {
				t.Errorf("metadata accessors: %+v", got.objectMeta)
			}
		})
	}
}

func checkErr(t *testing.T, what, want string, got error) {
	t.Helper()
	switch {
	case want == "" && got != nil:
		t.Errorf("%s error %v, want none", what, got)
	case want != "" && (got == nil || !strings.Contains(got.Error(), want)):
		t.Errorf("%s error %v, want one containing %q", what, got, want)
	}
}

// The host request is the scheduler's effective request (component-helpers PodRequests):
// max(app + sidecars, each init + the sidecars started before it), pod-level requests
// instead of the containers' when set, plus overhead; memory in MiB rounded up.
func TestPodTransformHostRequest(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want policy.Host
	}{{
		name: "app containers add up",
		// 500m + 250m = 750m; 1024 + 512 = 1536 MiB.
		spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: req("500m", "1Gi")}, {Resources: req("250m", "512Mi")}}},
		want: policy.Host{CPUMilli: 750, MemoryMiB: 1536},
	}, {
		name: "a larger init container sets the request",
		// cpu max(500, 2000) = 2000m; memory max(1024, 256) = 1024 MiB.
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: req("2", "256Mi")}},
			Containers:     []corev1.Container{{Resources: req("500m", "1Gi")}}},
		want: policy.Host{CPUMilli: 2000, MemoryMiB: 1024},
	}, {
		name: "sidecar runs beside the app and the later init containers",
		// running: app 500m/200Mi + sidecar 300m/100Mi = 800m/300Mi; the init after the
		// sidecar: 1000m/1024Mi + 300m/100Mi = 1300m/1124Mi → 1300m, 1124 MiB.
		spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "side", RestartPolicy: &always, Resources: req("300m", "100Mi")},
				{Name: "init", Resources: req("1", "1Gi")}},
			Containers: []corev1.Container{{Resources: req("500m", "200Mi")}}},
		want: policy.Host{CPUMilli: 1300, MemoryMiB: 1124},
	}, {
		name: "overhead is added",
		// 500m + 100m = 600m; 1024 + 64 = 1088 MiB.
		spec: corev1.PodSpec{
			Containers: []corev1.Container{{Resources: req("500m", "1Gi")}},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
		want: policy.Host{CPUMilli: 600, MemoryMiB: 1088},
	}, {
		name: "pod-level requests replace the containers', overhead still added",
		// pod-level 2 cores / 3Gi instead of 500m / 1Gi, + overhead 100m → 2100m, 3072 MiB.
		spec: corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("3Gi")}},
			Containers: []corev1.Container{{Resources: req("500m", "1Gi")}},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		want: policy.Host{CPUMilli: 2100, MemoryMiB: 3072},
	}, {
		name: "memory rounds up to whole MiB",
		// 1 MiB + 1 byte → 2 MiB; 1m stays 1m.
		spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: req("1m", "1048577")}}},
		want: policy.Host{CPUMilli: 1, MemoryMiB: 2},
	}, {
		name: "no requests",
		spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
		want: policy.Host{},
	}}
	res := gpushare.DefaultResources()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: tc.spec}
			out, err := podTransform(res, newConstraintBook())(pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.(*Pod).host); diff != "" {
				t.Errorf("host request (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(HostRequest(pod), out.(*Pod).host); diff != "" {
				t.Errorf("differs from HostRequest, which prioritize uses (-want,+got):\n%s", diff)
			}
			// Without workload tracking the request is not computed.
			out, _ = podTransform(res, nil)(pod)
			if h := out.(*Pod).host; h != (policy.Host{}) {
				t.Errorf("host request %+v computed without tracking", h)
			}
		})
	}
}

// client-go may pass an object through the transform twice (the watch-list's temporary
// store, then Replace), and passes tombstones and anything else it does not know on.
func TestSlimTransformsAreIdempotent(t *testing.T) {
	res := gpushare.DefaultResources()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for name, tr := range map[string]func(any) (any, error){
		"pod": podTransform(res, newConstraintBook()), "node": nodeTransform(res, true),
	} {
		for _, in := range []any{pod, node, "other"} {
			once, err := tr(in)
			if err != nil {
				t.Fatal(err)
			}
			twice, err := tr(once)
			if err != nil {
				t.Fatal(err)
			}
			if once != twice {
				t.Errorf("%s transform of %T: second pass returned %T %p, want the first's %p", name, in, twice, twice, once)
			}
		}
	}
}

func TestSlimPodDeepCopy(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "1",
			Annotations: map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":4,"1":4}}`, gpushare.AnnotationInitAllocation: `{"0":{"0":2}}`}},
		Spec: corev1.PodSpec{NodeName: "n1",
			InitContainers: []corev1.Container{{Name: "side", RestartPolicy: &always, Resources: gpuLimits("2", "")}},
			Containers:     []corev1.Container{{Name: "main", Resources: gpuLimits("8", "2")}}},
	}
	orig := NewPod(pod, gpushare.DefaultResources())
	cp := orig.DeepCopyObject().(*Pod)
	if diff := cmp.Diff(orig, cp, cmp.AllowUnexported(Pod{}, objectMeta{}, cardUse{})); diff != "" {
		t.Fatalf("copy differs (-orig,+copy):\n%s", diff)
	}
	cp.containers[0].Units = 99
	cp.usage[0].units = 99
	if orig.containers[0].Units == 99 || orig.usage[0].units == 99 {
		t.Error("the copy shares slices with the original")
	}
	if !orig.GetObjectKind().GroupVersionKind().Empty() {
		t.Error("a slim pod has no kind")
	}
}

func TestBindAnnotationKeysFitTheMask(t *testing.T) {
	if n := len(gpushare.BindAnnotationKeys()); n > 16 {
		t.Fatalf("%d bind annotation keys do not fit Pod.bindKeys (uint16)", n)
	}
}

// The store holds one Pod per pod of the cluster: keep it in the 176-byte size class (160
// until bind needed the scheduler name: 16 bytes more per pod, 640 KB at 40,000 pods).
func TestPodStaysSmall(t *testing.T) {
	if got := unsafe.Sizeof(Pod{}); got > 176 {
		t.Errorf("Pod is %d bytes, want at most 176", got)
	}
}
