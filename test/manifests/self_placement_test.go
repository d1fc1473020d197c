package manifests_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	selfPlacementPolicy = "gpushare-self-placement"
	// refusedSelfPlacement begins the refusal of gpushare-self-placement.
	refusedSelfPlacement = "only the gpushare scheduler and admins may place a pod that requests " + string(gpushare.DefaultMemResource)
	mirrorAnnotation     = "kubernetes.io/config.mirror"
)

// gpuPod is a pod of team-a whose container "main" limits gpu-mem to units (none when 0),
// created with spec.nodeName node ("" leaves it to the scheduler).
func gpuPod(node string, units int64) *corev1.Pod {
	p := envPod("team-a", units)
	p.Spec.NodeName = node
	return p
}

// requesting is p with its gpu-mem as a request of an init container "setup" instead of a
// limit of "main" (the API server keeps requests without limits for extended resources
// only when both match; admission sees what the client sent).
func requesting(p *corev1.Pod, units int64) *corev1.Pod {
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "i", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{gpushare.DefaultMemResource: *resource.NewQuantity(units, resource.DecimalSI)},
	}}}
	return p
}

// mirror is p as kubelet creates the mirror pod of a static pod.
func mirror(p *corev1.Pod) *corev1.Pod {
	p.Annotations = map[string]string{mirrorAnnotation: "hash"}
	return p
}

func nodeUser(node string) user.Info {
	return &user.DefaultInfo{Name: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
}

// TestSelfPlacement: a pod created with spec.nodeName that requests gpu-mem is refused unless
// an admin, the gpushare scheduler or the node of its own mirror pod creates it.
func TestSelfPlacement(t *testing.T) {
	c := compileBound(t, load(t), selfPlacementPolicy)
	master := &user.DefaultInfo{Name: "root", Groups: []string{"system:masters", "system:authenticated"}}
	clusterAdmin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:authenticated"}}
	runAdmitCases(t, c, allowUsers{"admin"}, []admitCase{
		{"tenant places a gpu-mem pod on a node", createPod(tenant(), gpuPod("gpu-a", 80)),
			refusedSelfPlacement + " on a node (spec.nodeName gpu-a, containers main)"},
		{"tenant places a pod whose init container requests gpu-mem", createPod(tenant(), requesting(gpuPod("gpu-a", 0), 4)),
			"containers setup"},
		{"a ReplicaSet's pod with spec.nodeName in its template", createPod(sa("system:serviceaccount:kube-system:replicaset-controller", ""), gpuPod("gpu-a", 8)),
			refusedSelfPlacement},
		{"tenant's gpu-mem pod left to the scheduler", createPod(tenant(), gpuPod("", 80)), ""},
		{"tenant places a pod without gpu-mem", createPod(tenant(), gpuPod("gpu-a", 0)), ""},
		{"tenant's forged mirror pod", createPod(tenant(), mirror(gpuPod("gpu-a", 80))), refusedSelfPlacement},
		{"node creates the mirror pod of its static pod", createPod(nodeUser("gpu-a"), mirror(gpuPod("gpu-a", 80))), ""},
		{"node creates a mirror pod for another node", createPod(nodeUser("gpu-b"), mirror(gpuPod("gpu-a", 80))), refusedSelfPlacement},
		{"node creates a pod that is not a mirror pod", createPod(nodeUser("gpu-a"), gpuPod("gpu-a", 80)), refusedSelfPlacement},
		{"system:masters places a gpu-mem pod", createPod(master, gpuPod("gpu-a", 80)), ""},
		{"cluster-admin (RBAC override on allocations.gpushare.io) places one", createPod(clusterAdmin, gpuPod("gpu-a", 80)), ""},
		{"extender's service account", createPod(sa(extenderSA, ""), gpuPod("gpu-a", 80)), ""},
		{"gpushare-scheduler's service account", createPod(sa(gpushareSchedulerSA, ""), gpuPod("gpu-a", 80)), ""},
		{"share-plugin's service account is not a scheduler", createPod(sa(sharePluginSA, "gpu-a"), gpuPod("gpu-a", 80)), refusedSelfPlacement},
		{"a user without groups", createPod(&user.DefaultInfo{Name: "bob"}, gpuPod("gpu-a", 80)), refusedSelfPlacement},
	})
}

// TestChartSelfPlacement: the chart's admins, users and gpu-mem resource name reach
// gpushare-self-placement; disabled, it renders no policy.
func TestChartSelfPlacement(t *testing.T) {
	ops := &user.DefaultInfo{Name: "carol", Groups: []string{"gpu-ops"}}
	master := &user.DefaultInfo{Name: "root", Groups: []string{"system:masters"}}
	t.Run("defaults", func(t *testing.T) {
		c := chartPolicy(t, render(t, "gpu-system", nil), selfPlacementPolicy)
		runAdmitCases(t, c, allowUsers{}, []admitCase{
			{"tenant", createPod(tenant(), gpuPod("gpu-a", 8)), refusedSelfPlacement},
			{"system:masters", createPod(master, gpuPod("gpu-a", 8)), ""},
			{"gpushare-scheduler of the release", createPod(sa("system:serviceaccount:gpu-system:gpushare-scheduler", ""), gpuPod("gpu-a", 8)), ""},
			{"gpushare-scheduler of kube-system", createPod(sa(gpushareSchedulerSA, ""), gpuPod("gpu-a", 8)), refusedSelfPlacement},
		})
	})
	t.Run("admin group, user and resource name", func(t *testing.T) {
		c := chartPolicy(t, render(t, "kube-system", []string{"admission.selfPlacement.adminGroups={gpu-ops}",
			"admission.selfPlacement.exemptUsernames={ci-bot}", "resources.memory=example.com/vram"}), selfPlacementPolicy)
		vram := gpuPod("gpu-a", 0)
		vram.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/vram": resource.MustParse("8")}
		runAdmitCases(t, c, allowUsers{}, []admitCase{
			{"tenant, renamed resource", createPod(tenant(), vram), "requests example.com/vram on a node"},
			{"tenant, the default name is no gpu-mem here", createPod(tenant(), gpuPod("gpu-a", 8)), ""},
			{"named group", createPod(ops, vram), ""},
			{"named user", createPod(&user.DefaultInfo{Name: "ci-bot"}, vram), ""},
			{"system:masters, no longer named", createPod(master, vram), "requests example.com/vram"},
		})
	})
	t.Run("disabled", func(t *testing.T) {
		c := render(t, "kube-system", []string{"admission.selfPlacement.enabled=false"})
		for _, k := range []string{"ValidatingAdmissionPolicy/" + selfPlacementPolicy, "ValidatingAdmissionPolicyBinding/" + selfPlacementPolicy} {
			if _, ok := c[k]; ok {
				t.Errorf("admission.selfPlacement.enabled=false still renders %s", k)
			}
		}
	})
}
