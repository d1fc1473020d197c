package manifests_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	draPluginSA         = "system:serviceaccount:kube-system:gpushare-dra-plugin"
	draNodeScopePolicy  = "gpushare-dra-plugin-node-scope"
	draNodeScopeRefusal = "may write only ResourceSlices whose spec.nodeName is"
)

// slice is a ResourceSlice of driver on node ("": a slice of no node).
func slice(node, driver string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver + "-x"},
		Spec:       resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	if node != "" {
		s.Spec.NodeName = &node
	} else {
		all := true
		s.Spec.AllNodes = &all
	}
	return s
}

// labelled is node name with labels given as key, value pairs.
func labelled(name string, kv ...string) *corev1.Node {
	n := node(name, nil)
	for i := 0; i+1 < len(kv); i += 2 {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

// TestDRAPluginNodeScopeManifest: the policy refuses on error and its binding covers the
// whole cluster, as deploy/admission's policies do; its expressions compile.
func TestDRAPluginNodeScopeManifest(t *testing.T) {
	m := loadPolicies(t, "dra/node-scope.yaml")
	p, b := m.policies[draNodeScopePolicy], m.bindings[draNodeScopePolicy]
	if p == nil || b == nil || len(m.policies) != 1 || len(m.bindings) != 1 {
		t.Fatalf("dra/node-scope.yaml: policies %v bindings %v, want %s and its binding only", m.policies, m.bindings, draNodeScopePolicy)
	}
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", p.Spec.FailurePolicy)
	}
	if b.Spec.PolicyName != draNodeScopePolicy || b.Spec.MatchResources != nil || b.Spec.ParamRef != nil ||
		!slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v: want policy %s, [Deny], no narrowing", b.Spec, draNodeScopePolicy)
	}
	if errs := compile(t, p).errs; len(errs) > 0 {
		t.Errorf("CEL compile errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestDRAPluginNodeScope: the DRA plugin of a node writes that node's slices of its driver
// and its isolation-enforced label, and nothing else, through the API server's own
// validator.
func TestDRAPluginNodeScope(t *testing.T) {
	c := compileBound(t, loadPolicies(t, "dra/node-scope.yaml"), draNodeScopePolicy)
	onA := sa(draPluginSA, "gpu-a")
	drv := gpushare.DRADriverName
	runAdmitCases(t, c, allowUsers{}, []admitCase{
		{"plugin of node A creates node A's slice",
			request{user: onA, op: admission.Create, resource: "resourceslices", object: slice("gpu-a", drv)}, ""},
		{"plugin of node A updates node A's slice",
			request{user: onA, op: admission.Update, resource: "resourceslices", old: slice("gpu-a", drv), object: slice("gpu-a", drv)}, ""},
		{"plugin of node A deletes node A's slice",
			request{user: onA, op: admission.Delete, resource: "resourceslices", old: slice("gpu-a", drv)}, ""},
		{"plugin of node A creates node B's slice",
			request{user: onA, op: admission.Create, resource: "resourceslices", object: slice("gpu-b", drv)},
			"the DRA plugin of node gpu-a " + draNodeScopeRefusal + " gpu-a, not gpu-b"},
		{"plugin of node A updates node B's slice",
			request{user: onA, op: admission.Update, resource: "resourceslices", old: slice("gpu-b", drv), object: slice("gpu-b", drv)},
			draNodeScopeRefusal},
		{"plugin of node A moves node B's slice to node A",
			request{user: onA, op: admission.Update, resource: "resourceslices", old: slice("gpu-b", drv), object: slice("gpu-a", drv)},
			draNodeScopeRefusal},
		{"plugin of node A moves its slice to node B",
			request{user: onA, op: admission.Update, resource: "resourceslices", old: slice("gpu-a", drv), object: slice("gpu-b", drv)},
			draNodeScopeRefusal},
		{"plugin of node A deletes node B's slice",
			request{user: onA, op: admission.Delete, resource: "resourceslices", old: slice("gpu-b", drv)},
			draNodeScopeRefusal},
		{"plugin of node A creates a slice of all nodes",
			request{user: onA, op: admission.Create, resource: "resourceslices", object: slice("", drv)},
			"not (none)"},
		{"plugin of node A creates node A's slice of another driver",
			request{user: onA, op: admission.Create, resource: "resourceslices", object: slice("gpu-a", "gpu.nvidia.com")},
			"only ResourceSlices of driver " + drv + ", not gpu.nvidia.com"},
		{"plugin token without a node",
			request{user: sa(draPluginSA, ""), op: admission.Create, resource: "resourceslices", object: slice("gpu-a", drv)},
			"credentials name no node"},
		{"plugin token naming two nodes",
			request{user: &user.DefaultInfo{Name: draPluginSA, Extra: map[string][]string{nodeNameExtra: {"gpu-a", "gpu-b"}}},
				op: admission.Create, resource: "resourceslices", object: slice("gpu-a", drv)},
			"credentials name no node"},
		{"plugin of node A labels node A isolation-enforced",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a", "cgpu", "true"),
				object: labelled("gpu-a", "cgpu", "true", gpushare.LabelIsolationEnforced, "limit")}, ""},
		{"plugin of node A removes node A's isolation-enforced",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a", gpushare.LabelIsolationEnforced, "none"),
				object: labelled("gpu-a")}, ""},
		{"plugin of node A labels node B",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-b"),
				object: labelled("gpu-b", gpushare.LabelIsolationEnforced, "limit")},
			"the DRA plugin of node gpu-a may not write node gpu-b"},
		{"plugin of node A changes another label of node A",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a", gpushare.LabelBackend, "dra"),
				object: labelled("gpu-a", gpushare.LabelBackend, "device-plugin")},
			"may change only its node's label " + gpushare.LabelIsolationEnforced},
		{"plugin of node A adds a label to node A",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a"),
				object: labelled("gpu-a", gpushare.LabelIsolation, "none")},
			"may change only its node's label"},
		{"plugin of node A removes a label of node A",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a", "cgpu", "true"), object: labelled("gpu-a")},
			"may change only its node's label"},
		{"plugin of node A annotates node A",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a"), object: node("gpu-a", map[string]string{"x": "y"})},
			"may change only its node's label"},
		{"plugin of node A taints node A",
			request{user: onA, op: admission.Update, resource: "nodes", old: labelled("gpu-a"), object: func() *corev1.Node {
				n := labelled("gpu-a")
				n.Spec.Unschedulable = true
				return n
			}()},
			"may change only its node's label"},
		{"plugin of node A deletes node A",
			request{user: onA, op: admission.Delete, resource: "nodes", old: labelled("gpu-a")},
			"may change only its node's label"},
		{"other identities are not this policy's",
			request{user: sa(sharePluginSA, "gpu-a"), op: admission.Create, resource: "resourceslices", object: slice("gpu-b", "gpu.nvidia.com")}, ""},
	})
}
