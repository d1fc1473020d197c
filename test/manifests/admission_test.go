// Package manifests_test checks the manifests of deploy/ that guard the API: RBAC rules
// (rbac_test.go) and the ValidatingAdmissionPolicies of deploy/admission: each manifest
// decodes strictly into the typed admissionregistration/v1 objects, every CEL expression
// compiles in the API server's own environment, and each policy, evaluated by the API
// server's own validator, admits and refuses what docs/security.md says it does.
package manifests_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	extenderSA          = "system:serviceaccount:kube-system:gpushare-extender"
	gpushareSchedulerSA = "system:serviceaccount:kube-system:gpushare-scheduler"
	sharePluginSA       = "system:serviceaccount:kube-system:share-plugin"
	nodeNameExtra       = "authentication.kubernetes.io/node-name"
	// refusedAllocation begins the refusal of gpushare-allocation-annotations.
	refusedAllocation = "only the gpushare extender, gpushare-scheduler and share-plugin may"
)

// manifests are the objects of deploy/admission by kind and name.
type manifests struct {
	policies map[string]*admissionregistrationv1.ValidatingAdmissionPolicy
	bindings map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// load decodes every YAML document of deploy/admission strictly (an unknown or misspelt
// field fails) into its typed object.
func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("admission/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
	return loadPolicies(t, files...)
}

// loadPolicies decodes the policies and bindings of files strictly; any other kind but
// ClusterRole fails.
func loadPolicies(t *testing.T, files ...string) manifests {
	t.Helper()
	m := manifests{
		policies: map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{},
		bindings: map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
	}
	for _, f := range files {
		docs, err := docsOf(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			doc := d.raw
			switch d.kind {
			case "ValidatingAdmissionPolicy":
				p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
				if err := yaml.UnmarshalStrict(doc, p); err != nil {
					t.Fatalf("%s#%d: %v", f, i, err)
				}
				m.policies[p.Name] = p
			case "ValidatingAdmissionPolicyBinding":
				b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
				if err := yaml.UnmarshalStrict(doc, b); err != nil {
					t.Fatalf("%s#%d: %v", f, i, err)
				}
				m.bindings[b.Name] = b
			case "ClusterRole":
			default:
				t.Fatalf("%s#%d: unexpected kind %q", f, i, d.kind)
			}
		}
	}
	return m
}

// compiled is a policy made ready to evaluate the way the API server's
// ValidatingAdmissionPolicy plugin does it (its compilePolicy is not exported).
type compiled struct {
	policy *admissionregistrationv1.ValidatingAdmissionPolicy
	// binding, when set, narrows which requests reach the policy (its matchResources); nil
	// is a binding that narrows nothing, as TestManifests requires of most policies.
	binding   *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	validator validating.Validator
	errs      []string // compile errors of single expressions
}

// compileBound compiles the policy name of m together with its binding.
func compileBound(t *testing.T, m manifests, name string) compiled {
	t.Helper()
	c := compile(t, m.policies[name])
	c.binding = m.bindings[name]
	return c
}

func compile(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) compiled {
	t.Helper()
	env := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	c, err := plugincel.NewCompositedCompiler(env)
	if err != nil {
		t.Fatal(err)
	}
	withAuthz := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	noAuthz := plugincel.OptionalVariableDeclarations{}
	out := compiled{policy: p}
	check := func(what string, r plugincel.CompilationResult) {
		if r.Error != nil {
			out.errs = append(out.errs, what+": "+r.Error.Error())
		}
	}
	for _, v := range p.Spec.Variables {
		check("variable "+v.Name, c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz, environment.StoredExpressions))
	}
	var conds, msgs []plugincel.ExpressionAccessor
	for i, v := range p.Spec.Validations {
		vc := &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		check("validation "+v.Expression, c.CompileCELExpression(vc, withAuthz, environment.StoredExpressions))
		conds = append(conds, vc)
		msgs = append(msgs, nil)
		if v.MessageExpression != "" {
			mc := &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
			check("messageExpression "+v.MessageExpression, c.CompileCELExpression(mc, noAuthz, environment.StoredExpressions))
			msgs[i] = mc
		}
	}
	var matcher matchconditions.Matcher
	if len(p.Spec.MatchConditions) > 0 {
		var mcs []plugincel.ExpressionAccessor
		for i := range p.Spec.MatchConditions {
			mc := (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
			check("matchCondition "+mc.Name, c.CompileCELExpression(mc, withAuthz, environment.StoredExpressions))
			mcs = append(mcs, mc)
		}
		matcher = matchconditions.NewMatcher(c.CompileCondition(mcs, withAuthz, environment.StoredExpressions),
			p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	out.validator = validating.NewValidator(
		c.CompileCondition(conds, withAuthz, environment.StoredExpressions),
		matcher,
		c.CompileCondition(nil, withAuthz, environment.StoredExpressions),
		c.CompileCondition(msgs, noAuthz, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
	return out
}

// request is one API write as the admission chain sees it.
type request struct {
	user        user.Info
	op          admission.Operation
	resource    string // pods, nodes, bindings, resourceslices
	subresource string // "", status, binding
	object, old runtime.Object
}

// admit evaluates the policy on r: "" when admitted, else the refusal messages.
func (c compiled) admit(t *testing.T, r request, authz authorizer.UnconditionalAuthorizer) string {
	t.Helper()
	group := map[string]string{"resourceslices": "resource.k8s.io"}[r.resource]
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: r.resource}
	kind := schema.GroupVersionKind{Group: group, Version: "v1", Kind: map[string]string{
		"pods": "Pod", "nodes": "Node", "bindings": "Binding", "resourceslices": "ResourceSlice"}[r.resource]}
	if r.subresource == "binding" {
		kind.Kind = "Binding"
	}
	var name, ns string
	for _, o := range []runtime.Object{r.object, r.old} {
		if m, ok := o.(metav1.Object); ok && o != nil {
			name, ns = m.GetName(), m.GetNamespace()
		}
	}
	attr := admission.NewAttributesRecord(r.object, r.old, kind, ns, name, gvr, r.subresource, r.op, nil, false, r.user)
	if !c.matches(t, attr) {
		return ""
	}
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: kind}
	if r.object != nil {
		va.VersionedObject = admission.NewLazyObject(r.object)
	}
	if r.old != nil {
		va.VersionedOldObject = admission.NewLazyObject(r.old)
	}
	res := c.validator.Validate(context.Background(), gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, authz)
	var refusals []string
	for _, d := range res.Decisions {
		if d.Evaluation == validating.EvalError {
			t.Fatalf("policy %s failed to evaluate: %s", c.policy.Name, d.Message)
		}
		if d.Action == validating.ActionDeny {
			refusals = append(refusals, d.Message)
		}
	}
	return strings.Join(refusals, "; ")
}

// admitCase is one request and what the policy must answer.
type admitCase struct {
	name string
	req  request
	want string // substring of the refusal; "" admits
}

// runAdmitCases evaluates each case on c with authz deciding the policy's authorizer checks;
// a case refused when want is "", or admitted or refused without want when want is set,
// fails.
func runAdmitCases(t *testing.T, c compiled, authz authorizer.UnconditionalAuthorizer, tests []admitCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.admit(t, tc.req, authz)
			if tc.want == "" && got != "" {
				t.Fatalf("refused: %s", got)
			}
			if tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("got refusal %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// allowUsers is an authorizer that allows every request of the named users and nothing else.
type allowUsers []string

func (a allowUsers) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if slices.Contains(a, attrs.GetUser().GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func pod(node string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team-a", Annotations: ann},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

func node(name string, ann map[string]string) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
	}
}

func binding(ann map[string]string) *corev1.Binding {
	return &corev1.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "team-a", Annotations: ann},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "gpu-a"},
	}
}

func tenant() user.Info {
	return &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}
}

func sa(name, node string) user.Info {
	u := &user.DefaultInfo{Name: name, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	if node != "" {
		u.Extra = map[string][]string{nodeNameExtra: {node}}
	}
	return u
}

// bound is what a pod carries after the extender bound it to card 0.
func bound() map[string]string {
	return map[string]string{
		gpushare.AnnotationAllocation: `{"0":{"0":2}}`,
		gpushare.AnnotationPodUnits:   "2",
		gpushare.AnnotationIndex:      "0",
		gpushare.AnnotationAssigned:   "false",
		"team":                        "a",
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<delete>" {
			delete(out, kv[i])
			continue
		}
		out[kv[i]] = kv[i+1]
	}
	return out
}

// policyNames are the policies of deploy/admission, each bound by a binding of its name.
var policyNames = []string{"gpushare-allocation-annotations", "gpushare-reserved-env", "gpushare-self-placement", "gpushare-share-plugin-node-scope"}

func TestManifests(t *testing.T) {
	m := load(t)
	for _, name := range policyNames {
		p, ok := m.policies[name]
		if !ok {
			t.Fatalf("no ValidatingAdmissionPolicy %s in deploy/admission", name)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail (a policy error must refuse, not admit)", name, p.Spec.FailurePolicy)
		}
		b, ok := m.bindings[name]
		if !ok {
			t.Fatalf("policy %s has no ValidatingAdmissionPolicyBinding of the same name", name)
		}
		if b.Spec.PolicyName != name || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
			t.Errorf("binding %s: policy %q actions %v, want %q [Deny]", name, b.Spec.PolicyName, b.Spec.ValidationActions, name)
		}
		if name == "gpushare-reserved-env" {
			// Its exemptions are namespaces, and nothing else.
			if err := narrowsOnlyByNamespaceName(b); err != nil {
				t.Errorf("binding %s: %v", name, err)
			}
		} else if b.Spec.MatchResources != nil || b.Spec.ParamRef != nil {
			t.Errorf("binding %s narrows the policy (matchResources/paramRef); it must cover the whole cluster", name)
		}
		if errs := compile(t, p).errs; len(errs) > 0 {
			t.Errorf("%s: CEL compile errors:\n%s", name, strings.Join(errs, "\n"))
		}
	}
	if len(m.policies) != len(policyNames) || len(m.bindings) != len(policyNames) {
		t.Errorf("deploy/admission has %d policies and %d bindings, want the %d tested here", len(m.policies), len(m.bindings), len(policyNames))
	}
}

// TestServiceAccountNames: the policies trust the service accounts deploy/ creates.
func TestServiceAccountNames(t *testing.T) {
	for file, want := range map[string]string{
		"extender/rbac.yaml":           extenderSA,
		"gpushare-scheduler/rbac.yaml": gpushareSchedulerSA,
		"share-plugin/rbac.yaml":       sharePluginSA,
	} {
		docs, err := docsOf(file)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, d := range docs {
			var sa corev1.ServiceAccount
			if err := yaml.Unmarshal(d.raw, &sa); err != nil {
				t.Fatal(err)
			}
			if sa.Kind == "ServiceAccount" {
				found = append(found, "system:serviceaccount:"+sa.Namespace+":"+sa.Name)
			}
		}
		if !slices.Contains(found, want) {
			t.Errorf("%s creates service accounts %v; the policies trust %s", file, found, want)
		}
	}
}

func TestAllocationAnnotations(t *testing.T) {
	c := compile(t, load(t).policies["gpushare-allocation-annotations"])
	admins := allowUsers{"admin"}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}
	kubelet := &user.DefaultInfo{Name: "system:node:gpu-a", Groups: []string{"system:nodes"}}
	scheduler := &user.DefaultInfo{Name: "system:kube-scheduler"}
	tests := []admitCase{
		{"tenant creates a pod without allocation annotations",
			request{user: tenant(), op: admission.Create, resource: "pods", object: pod("", map[string]string{"team": "a"})}, ""},
		{"tenant creates a pod carrying an allocation (a copy of a bound pod)",
			request{user: tenant(), op: admission.Create, resource: "pods", object: pod("", bound())},
			"create the pod without them"},
		{"tenant changes the card of a bound pod",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationAllocation, `{"0":{"1":2}}`, gpushare.AnnotationIndex, "1"))},
			refusedAllocation},
		{"tenant removes the allocation record",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationAllocation, "<delete>"))},
			gpushare.AnnotationAllocation},
		{"tenant adds a gpushare.io key",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), "gpushare.io/anything", "x"))},
			"gpushare.io/anything"},
		{"tenant changes the unit its record counts in",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), gpushare.AnnotationUnit, "GiB")),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationUnit, "MiB"))},
			gpushare.AnnotationUnit},
		{"tenant adds a unit to a record without one",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationUnit, "GiB"))},
			gpushare.AnnotationUnit},
		{"tenant removes the unit of its record",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), gpushare.AnnotationUnit, "GiB")),
				object: pod("gpu-a", bound())},
			gpushare.AnnotationUnit},
		{"tenant binds through bindings with a record in another unit",
			request{user: tenant(), op: admission.Create, resource: "bindings", object: binding(map[string]string{gpushare.AnnotationUnit: "MiB"})},
			gpushare.AnnotationUnit},
		{"extender binds with a record and its unit",
			request{user: sa(extenderSA, ""), op: admission.Create, resource: "pods", subresource: "binding", object: binding(with(bound(), gpushare.AnnotationUnit, "GiB"))}, ""},
		{"share-plugin writes the record of a pod it placed, with its unit",
			request{user: sa(sharePluginSA, "gpu-a"), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), gpushare.AnnotationUnit, "GiB")),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationUnit, "MiB", gpushare.AnnotationAllocation, `{"0":{"0":2048}}`))}, ""},
		{"tenant edits another annotation of a bound pod",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), "team", "b"))}, ""},
		{"tenant with pods/binding binds with an allocation",
			request{user: tenant(), op: admission.Create, resource: "pods", subresource: "binding", object: binding(bound())},
			refusedAllocation},
		{"kube-scheduler binds without annotations",
			request{user: scheduler, op: admission.Create, resource: "pods", subresource: "binding", object: binding(nil)}, ""},
		{"extender binds with an allocation",
			request{user: sa(extenderSA, ""), op: admission.Create, resource: "pods", subresource: "binding", object: binding(bound())}, ""},
		{"extender clears stale annotations before a bind",
			request{user: sa(extenderSA, ""), op: admission.Update, resource: "pods", old: pod("", bound()), object: pod("", map[string]string{})}, ""},
		{"gpushare-scheduler binds with an allocation",
			request{user: sa(gpushareSchedulerSA, ""), op: admission.Create, resource: "pods", subresource: "binding", object: binding(bound())}, ""},
		{"tenant binds with an allocation through the legacy bindings endpoint",
			request{user: tenant(), op: admission.Create, resource: "bindings", object: binding(bound())},
			refusedAllocation},
		{"a second scheduler on system:kube-scheduler binds with an allocation through bindings",
			request{user: scheduler, op: admission.Create, resource: "bindings", object: binding(with(bound(), "team", "<delete>"))},
			gpushare.AnnotationAllocation},
		{"kube-scheduler binds through bindings without annotations",
			request{user: scheduler, op: admission.Create, resource: "bindings", object: binding(map[string]string{"team": "a"})}, ""},
		{"extender binds with an allocation through bindings",
			request{user: sa(extenderSA, ""), op: admission.Create, resource: "bindings", object: binding(bound())}, ""},
		{"gpushare-scheduler binds with an allocation through bindings",
			request{user: sa(gpushareSchedulerSA, ""), op: admission.Create, resource: "bindings", object: binding(bound())}, ""},
		{"another service account binds with an allocation",
			request{user: sa("system:serviceaccount:kube-system:other-scheduler", ""), op: admission.Create, resource: "pods", subresource: "binding", object: binding(bound())},
			refusedAllocation},
		{"a gpushare-scheduler of another namespace binds with an allocation",
			request{user: sa("system:serviceaccount:team-a:gpushare-scheduler", ""), op: admission.Create, resource: "pods", subresource: "binding", object: binding(bound())},
			gpushare.AnnotationAllocation},
		{"share-plugin records Allocate progress",
			request{user: sa(sharePluginSA, "gpu-a"), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationAssigned, "true", gpushare.AnnotationAllocated, "app/0"))}, ""},
		{"share-plugin records an over-grant episode",
			request{user: sa(sharePluginSA, "gpu-a"), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationOverGrant, `{"container":"main"}`))}, ""},
		{"tenant removes the over-grant record",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), gpushare.AnnotationOverGrant, `{"container":"main"}`)),
				object: pod("gpu-a", bound())},
			gpushare.AnnotationOverGrant},
		{"another service account of kube-system is a tenant here",
			request{user: sa("system:serviceaccount:kube-system:default", ""), op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationAssigned, "true"))},
			gpushare.AnnotationAssigned},
		{"a cluster admin repairs a record (RBAC allows override on allocations.gpushare.io)",
			request{user: admin, op: admission.Update, resource: "pods", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationAllocation, `{"0":{"1":2}}`))}, ""},
		{"kubelet updates the status of a bound pod",
			request{user: kubelet, op: admission.Update, resource: "pods", subresource: "status", old: pod("gpu-a", bound()), object: pod("gpu-a", bound())}, ""},
		{"pods/status cannot carry an allocation change",
			request{user: kubelet, op: admission.Update, resource: "pods", subresource: "status", old: pod("gpu-a", bound()),
				object: pod("gpu-a", with(bound(), gpushare.AnnotationIndex, "1"))},
			gpushare.AnnotationIndex},
		{"nodes are not this policy's",
			request{user: tenant(), op: admission.Update, resource: "nodes", old: node("gpu-a", nil), object: node("gpu-a", map[string]string{"gpushare.io/x": "y"})}, ""},
	}
	runAdmitCases(t, c, admins, tests)
}

// TestAllocationAnnotationsCoverWireNames: every pod annotation the extender and
// share-plugin write (pkg/gpushare) is one the policy protects.
func TestAllocationAnnotationsCoverWireNames(t *testing.T) {
	c := compile(t, load(t).policies["gpushare-allocation-annotations"])
	for _, k := range gpushare.BindAnnotationKeys() {
		t.Run(k, func(t *testing.T) {
			req := request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", nil), object: pod("gpu-a", map[string]string{k: "1"})}
			if got := c.admit(t, req, allowUsers{}); !strings.Contains(got, k) {
				t.Fatalf("tenant adding %s: got %q, want a refusal naming it", k, got)
			}
		})
	}
}

// TestCardChoiceAnnotationsAreTenants: the card annotations a pod chooses its cards with
// (pkg/gpushare) are the tenant's to set on create and to change, while any other
// gpushare.io key stays refused.
func TestCardChoiceAnnotationsAreTenants(t *testing.T) {
	c := compile(t, load(t).policies["gpushare-allocation-annotations"])
	for _, k := range gpushare.CardChoiceAnnotationKeys() {
		t.Run(k, func(t *testing.T) {
			for _, req := range []request{
				{user: tenant(), op: admission.Create, resource: "pods", object: pod("", map[string]string{k: "A100"})},
				{user: tenant(), op: admission.Update, resource: "pods", old: pod("", map[string]string{k: "A100"}), object: pod("", map[string]string{k: "T4"})},
				{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), k, "A100")), object: pod("gpu-a", bound())},
			} {
				if got := c.admit(t, req, allowUsers{}); got != "" {
					t.Errorf("tenant %s %s: refused %q", req.op, k, got)
				}
			}
		})
	}
}

// TestMemLimitAnnotationIsCreateOnly: a tenant gives its containers memory limits
// (gpushare.AnnotationMemLimit) and compute shares (gpushare.AnnotationComputeShare) when it
// creates the pod, and may not add, change or remove them after, nor bind with them; the
// trusted writers and an admin with the override may.
func TestMemLimitAnnotationIsCreateOnly(t *testing.T) {
	for _, k := range []string{gpushare.AnnotationMemLimit, gpushare.AnnotationComputeShare} {
		t.Run(k, func(t *testing.T) { createOnly(t, k) })
	}
}

func createOnly(t *testing.T, k string) {
	c := compile(t, load(t).policies["gpushare-allocation-annotations"])
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}
	admins := allowUsers{admin.Name}
	tests := []admitCase{
		{"tenant creates a pod with limits",
			request{user: tenant(), op: admission.Create, resource: "pods", object: pod("", map[string]string{k: "main=12"})}, ""},
		{"tenant keeps them on an update",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), k, "main=12")), object: pod("gpu-a", with(bound(), k, "main=12", "team", "a"))}, ""},
		{"tenant raises a limit",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), k, "main=12")), object: pod("gpu-a", with(bound(), k, "main=14"))}, k},
		{"tenant adds limits to a pending pod",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("", nil), object: pod("", map[string]string{k: "main=12"})}, k},
		{"tenant removes them",
			request{user: tenant(), op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), k, "main=12")), object: pod("gpu-a", bound())}, k},
		{"a Binding carries them",
			request{user: tenant(), op: admission.Create, resource: "pods", subresource: "binding", object: binding(map[string]string{k: "main=12"})}, k},
		{"a pod of ResourceClaims names one",
			request{user: tenant(), op: admission.Create, resource: "pods", object: withClaim(pod("", map[string]string{k: "main=12"}))},
			"not supported for pods with ResourceClaims"},
		{"a pod of ResourceClaims without one",
			request{user: tenant(), op: admission.Create, resource: "pods", object: withClaim(pod("", nil))}, ""},
		{"an admin with the override changes them",
			request{user: admin, op: admission.Update, resource: "pods", old: pod("gpu-a", with(bound(), k, "main=12")), object: pod("gpu-a", with(bound(), k, "main=14"))}, ""},
	}
	runAdmitCases(t, c, admins, tests)
}

// withClaim is p with a ResourceClaim from template "gpu".
func withClaim(p *corev1.Pod) *corev1.Pod {
	tmpl := "gpu"
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	return p
}

func TestSharePluginNodeScope(t *testing.T) {
	c := compile(t, load(t).policies["gpushare-share-plugin-node-scope"])
	onA := sa(sharePluginSA, "gpu-a")
	inv := map[string]string{gpushare.AnnotationNodeInventory: "[]"}
	tests := []admitCase{
		{"plugin of node A annotates node A",
			request{user: onA, op: admission.Update, resource: "nodes", old: node("gpu-a", nil), object: node("gpu-a", inv)}, ""},
		{"plugin of node A patches node A's status",
			request{user: onA, op: admission.Update, resource: "nodes", subresource: "status", old: node("gpu-a", nil), object: node("gpu-a", nil)}, ""},
		{"plugin of node A annotates node B",
			request{user: onA, op: admission.Update, resource: "nodes", old: node("gpu-b", nil), object: node("gpu-b", inv)},
			"share-plugin of node gpu-a may not write node gpu-b"},
		{"plugin of node A patches node B's status",
			request{user: onA, op: admission.Update, resource: "nodes", subresource: "status", old: node("gpu-b", nil), object: node("gpu-b", nil)},
			"may not write node gpu-b"},
		{"plugin of node A patches a pod on node A",
			request{user: onA, op: admission.Update, resource: "pods", old: pod("gpu-a", bound()), object: pod("gpu-a", with(bound(), gpushare.AnnotationAssigned, "true"))}, ""},
		{"plugin of node A patches a pod on node B",
			request{user: onA, op: admission.Update, resource: "pods", old: pod("gpu-b", bound()), object: pod("gpu-b", with(bound(), gpushare.AnnotationAssigned, "true"))},
			"may not write pod team-a/nb of node gpu-b"},
		{"plugin of node A patches a pending pod",
			request{user: onA, op: admission.Update, resource: "pods", old: pod("", nil), object: pod("", bound())},
			"not bound to a node"},
		{"plugin of node A deletes a pod on node B",
			request{user: onA, op: admission.Delete, resource: "pods", old: pod("gpu-b", nil)},
			"may not write pod"},
		{"plugin token without a node",
			request{user: sa(sharePluginSA, ""), op: admission.Update, resource: "nodes", old: node("gpu-a", nil), object: node("gpu-a", inv)},
			"credentials name no node"},
		{"plugin token naming two nodes",
			request{user: &user.DefaultInfo{Name: sharePluginSA, Extra: map[string][]string{nodeNameExtra: {"gpu-a", "gpu-b"}}},
				op: admission.Update, resource: "nodes", old: node("gpu-a", nil), object: node("gpu-a", inv)},
			"credentials name no node"},
		{"other identities are not this policy's",
			request{user: sa(extenderSA, ""), op: admission.Update, resource: "nodes", old: node("gpu-b", nil), object: node("gpu-b", inv)}, ""},
	}
	runAdmitCases(t, c, allowUsers{}, tests)
}
