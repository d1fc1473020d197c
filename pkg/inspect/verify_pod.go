package inspect

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Where the probe is in the images and what its pod's containers are called.
const (
	// probeBinary is gpushare-probe's path in the share-plugin image.
	probeBinary = "/usr/bin/gpushare-probe"
	// containerGranted requests one gpu-mem unit; containerSibling requests none and must
	// see no card.
	containerGranted = "granted"
	containerSibling = "sibling"
	// probeAppName is the pods' app.kubernetes.io/name.
	probeAppName = "gpushare-probe"
)

// probeTarget is one node to verify and what its labels promise.
type probeTarget struct {
	Node string
	// Isolation and Enforced are the raw values of the node's gpushare.io/isolation and
	// gpushare.io/isolation-enforced labels, Unit its gpu-mem unit.
	Isolation, Enforced string
	Unit                gpushare.Unit
	// ComputeShare is the compute share (percent) the granted container asks for; 0: none
	// (probeComputeShare).
	ComputeShare int
}

// probePod is the pod that verifies t: a container granted one unit of mem (and
// t.ComputeShare, when set) and a sibling granted nothing, both running gpushare-probe from image with the node's promise, placed by
// the scheduler on t.Node through a required node affinity (not spec.nodeName, which would
// skip the scheduler and its gpu-mem accounting). It asks for no privilege.
func probePod(ns, runID string, i int, t probeTarget, image string, mem corev1.ResourceName) *corev1.Pod {
	args := []string{
		"--isolation=" + t.Isolation, "--isolation-enforced=" + t.Enforced, "--unit=" + t.Unit.String(),
	}
	container := func(name string, cards int) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, Command: []string{probeBinary},
			Args: append(append([]string(nil), args...), fmt.Sprintf("--expect-cards=%d", cards)),
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		}
	}
	granted := container(containerGranted, 1)
	granted.Resources.Limits = corev1.ResourceList{mem: resource.MustParse("1")}
	var annotations map[string]string
	if t.ComputeShare > 0 {
		annotations = map[string]string{gpushare.AnnotationComputeShare: fmt.Sprintf("%s=%d", containerGranted, t.ComputeShare)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%s-%s-%d", probeAppName, runID, i),
			Namespace:   ns,
			Labels:      map[string]string{gpushare.LabelVerifyRun: runID, "app.kubernetes.io/name": probeAppName},
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr[int64](1),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{t.Node}}},
				}}},
			}},
			Containers: []corev1.Container{granted, container(containerSibling, 0)},
		},
	}
}

// defaultProbeImage is the share-plugin image of this release (the VERSION file's tag, the
// one deploy/ references), which holds probeBinary.
const defaultProbeImage = "gpushare/share-plugin:v0.1.0"
