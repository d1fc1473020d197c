package manifests_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	reservedEnvPolicy = "gpushare-reserved-env"
	// refusedEnv and refusedPrefix end the policy's two refusals.
	refusedEnv    = "reserved for the GPU device plugin and the NVIDIA runtime"
	refusedPrefix = "choose a prefix that cannot begin one"
	// daemonSetController creates the pods of every DaemonSet, in every namespace.
	daemonSetController = "system:serviceaccount:kube-system:daemon-set-controller"
)

// envPod is a pod in namespace ns whose container "main" requests units of gpu-mem (none
// when 0) and sets env.
func envPod(ns string, units int64, env ...corev1.EnvVar) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "i", Env: env}
	if units > 0 {
		c.Resources.Limits = corev1.ResourceList{gpushare.DefaultMemResource: *resource.NewQuantity(units, resource.DecimalSI)}
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
}

func envVar(name string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: "x"} }

// fromConfigMap is an envFrom of ConfigMap "vars" under prefix.
func fromConfigMap(prefix string) corev1.EnvFromSource {
	return corev1.EnvFromSource{Prefix: prefix, ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vars"}}}
}

// withEnvFrom is p with its container "main" taking env from.
func withEnvFrom(p *corev1.Pod, from ...corev1.EnvFromSource) *corev1.Pod {
	p.Spec.Containers[0].EnvFrom = from
	return p
}

// withInit is p with an init container "setup" that sets env.
func withInit(p *corev1.Pod, env ...corev1.EnvVar) *corev1.Pod {
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "setup", Image: "i", Env: env})
	return p
}

// withDebug is a copy of p with an ephemeral container named name that sets env, as
// kubectl debug adds it.
func withDebug(p *corev1.Pod, name string, env ...corev1.EnvVar) *corev1.Pod {
	out := p.DeepCopy()
	out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox", Env: env}, TargetContainerName: "main"})
	return out
}

func createPod(u user.Info, p *corev1.Pod) request {
	return request{user: u, op: admission.Create, resource: "pods", object: p}
}

func addDebug(u user.Info, old, p *corev1.Pod) request {
	return request{user: u, op: admission.Update, resource: "pods", subresource: "ephemeralcontainers", old: old, object: p}
}

func TestReservedEnv(t *testing.T) {
	c := compileBound(t, load(t), reservedEnvPolicy)
	running := envPod("team-a", 1)
	tests := []admitCase{
		{"tenant GPU pod sets NVIDIA_VISIBLE_DEVICES",
			createPod(tenant(), envPod("team-a", 1, envVar("NVIDIA_VISIBLE_DEVICES"))), `container "main" sets NVIDIA_VISIBLE_DEVICES`},
		{"pod without gpu-mem sets NVIDIA_VISIBLE_DEVICES",
			createPod(tenant(), envPod("team-a", 0, envVar("NVIDIA_VISIBLE_DEVICES"))), `container "main" sets NVIDIA_VISIBLE_DEVICES`},
		{"the refusal says what is reserved",
			createPod(tenant(), envPod("team-a", 1, envVar("NVIDIA_VISIBLE_DEVICES"))),
			refusedEnv + " (NVIDIA_*, CUDA_MPS_*, ALIYUN_COM_GPU_MEM_*, CUDA_VISIBLE_DEVICES, CUDA_VERSION)"},
		{"every reserved variable of a container is named",
			createPod(tenant(), envPod("team-a", 1, envVar("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), envVar("PATH"), envVar("ALIYUN_COM_GPU_MEM_CONTAINER"))),
			`container "main" sets CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, container "main" sets ALIYUN_COM_GPU_MEM_CONTAINER`},
		{"a value taken from a Secret is set by name all the same",
			createPod(tenant(), envPod("team-a", 1, corev1.EnvVar{Name: "CUDA_VISIBLE_DEVICES", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})),
			"sets CUDA_VISIBLE_DEVICES"},
		{"init container sets NVIDIA_DRIVER_CAPABILITIES",
			createPod(tenant(), withInit(envPod("team-a", 1), envVar("NVIDIA_DRIVER_CAPABILITIES"))), `container "setup" sets NVIDIA_DRIVER_CAPABILITIES`},
		{"a pod created by the DaemonSet controller in a tenant namespace",
			createPod(sa(daemonSetController, ""), envPod("team-a", 0, envVar("NVIDIA_VISIBLE_DEVICES"))), "sets NVIDIA_VISIBLE_DEVICES"},
		// NVIDIA's toolkit hook apply-cuda-memory-limits reads these; only share-plugin's CDI
		// spec may set them.
		{"a container sets its own GPU memory limit for the toolkit's hook",
			createPod(tenant(), envPod("team-a", 1, envVar("NVIDIA_GPU_MEMORY_LIMIT"), envVar("NVIDIA_GPU_MEMORY_REQUESTS"))),
			`container "main" sets NVIDIA_GPU_MEMORY_LIMIT, container "main" sets NVIDIA_GPU_MEMORY_REQUESTS`},
		{"envFrom under NVIDIA_GPU_MEMORY_", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("NVIDIA_GPU_MEMORY_"))),
			"prefix NVIDIA_GPU_MEMORY_, which could set NVIDIA_*"},
		{"ordinary and look-alike variables",
			createPod(tenant(), envPod("team-a", 1, envVar("CUDA_HOME"), envVar("CUDA_DEVICE_ORDER"), envVar("MY_NVIDIA_VISIBLE_DEVICES"),
				envVar("nvidia_visible_devices"), envVar("CUDA_VISIBLE_DEVICES_COUNT"), envVar("ALIYUN_COM_GPU"))), ""},

		{"envFrom under NVIDIA_", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("NVIDIA_"))),
			`container "main" takes envFrom under prefix NVIDIA_, which could set NVIDIA_*`},
		{"envFrom under a prefix a reserved prefix begins", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("NVIDIA_VISIBLE_"))),
			"prefix NVIDIA_VISIBLE_, which could set NVIDIA_*"},
		{"envFrom under N", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("N"))), "prefix N, which could set NVIDIA_*"},
		{"envFrom under CUDA_", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("CUDA_"))),
			"prefix CUDA_, which could set CUDA_MPS_* or CUDA_VISIBLE_DEVICES or CUDA_VERSION"},
		{"envFrom under CUDA_VIS", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("CUDA_VIS"))), "could set CUDA_VISIBLE_DEVICES"},
		{"envFrom under A", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap("A"))), "could set ALIYUN_COM_GPU_MEM_*"},
		{"envFrom of a Secret under ALIYUN_COM_GPU_MEM_CONT", createPod(tenant(), withEnvFrom(envPod("team-a", 1), corev1.EnvFromSource{
			Prefix: "ALIYUN_COM_GPU_MEM_CONT", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}})),
			refusedPrefix},
		{"init container takes envFrom under ALIYUN_", createPod(tenant(), func() *corev1.Pod {
			p := withInit(envPod("team-a", 1))
			p.Spec.InitContainers[0].EnvFrom = []corev1.EnvFromSource{fromConfigMap("ALIYUN_")}
			return p
		}()), `container "setup" takes envFrom under prefix ALIYUN_, which could set ALIYUN_COM_GPU_MEM_*`},
		{"a pod created with an ephemeral container that sets CUDA_MPS_PIPE_DIRECTORY",
			createPod(tenant(), withDebug(envPod("team-a", 1), "debugger", envVar("CUDA_MPS_PIPE_DIRECTORY"))), `container "debugger" sets CUDA_MPS_PIPE_DIRECTORY`},
		{"envFrom under prefixes that cannot begin a reserved name", createPod(tenant(), withEnvFrom(envPod("team-a", 1),
			fromConfigMap("APP_"), fromConfigMap("CUDA_HOME_"), fromConfigMap("CUDA_VISIBLE_DEVICES_"), fromConfigMap("MY_NVIDIA_"))), ""},
		// Admission cannot see a ConfigMap's keys: docs/security.md says so and what covers it.
		{"envFrom without a prefix", createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap(""))), ""},

		{"kubectl debug adds a container that sets NVIDIA_VISIBLE_DEVICES",
			addDebug(tenant(), running, withDebug(running, "debugger", envVar("NVIDIA_VISIBLE_DEVICES"))), `container "debugger" sets NVIDIA_VISIBLE_DEVICES`},
		{"kubectl debug adds a container under envFrom prefix CUDA_MPS_",
			addDebug(tenant(), running, func() *corev1.Pod {
				p := withDebug(running, "debugger")
				p.Spec.EphemeralContainers[0].EnvFrom = []corev1.EnvFromSource{fromConfigMap("CUDA_MPS_")}
				return p
			}()), `container "debugger" takes envFrom under prefix CUDA_MPS_`},
		{"kubectl debug adds a container under envFrom prefix N",
			addDebug(tenant(), running, func() *corev1.Pod {
				p := withDebug(running, "debugger")
				p.Spec.EphemeralContainers[0].EnvFrom = []corev1.EnvFromSource{fromConfigMap("N")}
				return p
			}()), `container "debugger" takes envFrom under prefix N, which could set NVIDIA_*`},
		{"kubectl debug adds a plain container", addDebug(tenant(), running, withDebug(running, "debugger")), ""},
		// A pod admitted before the policy keeps running; adding a debug container to it is
		// judged by what the request adds.
		{"kubectl debug on a pod that already sets one",
			addDebug(tenant(), withDebug(envPod("team-a", 1, envVar("NVIDIA_VISIBLE_DEVICES")), "old", envVar("CUDA_VISIBLE_DEVICES")),
				withDebug(withDebug(envPod("team-a", 1, envVar("NVIDIA_VISIBLE_DEVICES")), "old", envVar("CUDA_VISIBLE_DEVICES")), "debugger")), ""},
		{"updating such a pod's labels", request{user: tenant(), op: admission.Update, resource: "pods",
			old: envPod("team-a", 1, envVar("NVIDIA_VISIBLE_DEVICES")), object: envPod("team-a", 1, envVar("NVIDIA_VISIBLE_DEVICES"))}, ""},

		{"a pod in kube-system (share-plugin's DaemonSet)",
			createPod(sa(daemonSetController, ""), envPod("kube-system", 0, envVar("NVIDIA_VISIBLE_DEVICES"))), ""},
		{"a debug container in kube-system", addDebug(tenant(), envPod("kube-system", 0), withDebug(envPod("kube-system", 0), "d", envVar("NVIDIA_VISIBLE_DEVICES"))), ""},
		{"a pod in a namespace not exempt here", createPod(sa(daemonSetController, ""), envPod("gpu-operator", 0, envVar("NVIDIA_VISIBLE_DEVICES"))),
			"sets NVIDIA_VISIBLE_DEVICES"},
		{"a cluster admin is not exempt", createPod(&user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}},
			envPod("team-a", 0, envVar("NVIDIA_VISIBLE_DEVICES"))), "sets NVIDIA_VISIBLE_DEVICES"},
	}
	for _, name := range []string{"NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES",
		"NVIDIA_GDRCOPY", "NVIDIA_IMEX_CHANNELS", "CUDA_VERSION", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"} {
		tests = append(tests, admitCase{name + " is reserved", createPod(tenant(), envPod("team-a", 1, envVar(name))), "sets " + name})
	}
	runAdmitCases(t, c, allowUsers{}, tests)
}

// TestReservedEnvCoversWireNames: every environment variable pkg/gpushare names (what
// share-plugin's Allocate hands a container) is reserved, set by name and under an envFrom
// prefix made of its first letters.
func TestReservedEnvCoversWireNames(t *testing.T) {
	c := compileBound(t, load(t), reservedEnvPolicy)
	names := envNames(t)
	for _, want := range []string{gpushare.EnvVisibleDevices, gpushare.EnvContainerUnits, gpushare.EnvMPSPinnedMemLimit, gpushare.EnvMPSPipeDirectory} {
		if !names[want] {
			t.Fatalf("found %v in ../pkg/gpushare, not %s", names, want)
		}
	}
	for n := range names {
		t.Run(n, func(t *testing.T) {
			if got := c.admit(t, createPod(tenant(), envPod("team-a", 1, envVar(n))), allowUsers{}); !strings.Contains(got, "sets "+n) {
				t.Errorf("a tenant setting %s: got %q, want a refusal naming it", n, got)
			}
			prefix := n[:len(n)/2]
			if got := c.admit(t, createPod(tenant(), withEnvFrom(envPod("team-a", 1), fromConfigMap(prefix))), allowUsers{}); !strings.Contains(got, refusedPrefix) {
				t.Errorf("a tenant taking envFrom under %s: got %q, want a refusal", prefix, got)
			}
		})
	}
}

// envNames are the values of the Env* constants in the non-test sources of pkg/gpushare.
func envNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../pkg/gpushare/*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^\s*Env\w+\s*=\s*"([^"]+)"`)
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestReservedEnvAdmitsGpushareDaemonSets: the pods of deploy/'s DaemonSets that set NVIDIA_*
// (share-plugin, the MPS daemon) are in a namespace the policy leaves out, so installing the
// policy does not stop gpushare itself.
func TestReservedEnvAdmitsGpushareDaemonSets(t *testing.T) {
	c := compileBound(t, load(t), reservedEnvPolicy)
	for _, file := range []string{"share-plugin/daemonset.yaml", "mps/daemonset.yaml"} {
		docs, err := docsOf(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.kind != "DaemonSet" {
				continue
			}
			var ds appsv1.DaemonSet
			if err := yaml.Unmarshal(d.raw, &ds); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-x", Namespace: ds.Namespace}, Spec: ds.Spec.Template.Spec}
			if got := c.admit(t, createPod(sa(daemonSetController, ""), p), allowUsers{}); got != "" {
				t.Errorf("%s: the DaemonSet's pod is refused: %s", file, got)
			}
			p.Namespace = "team-a"
			if got := c.admit(t, createPod(sa(daemonSetController, ""), p), allowUsers{}); !strings.Contains(got, "sets NVIDIA_") {
				t.Errorf("%s: the same pod in a tenant's namespace: got %q, want a refusal (the test proves nothing otherwise)", file, got)
			}
		}
	}
}
