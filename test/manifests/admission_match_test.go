package manifests_test

import (
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// namespaceNames are the namespaces the tests' requests use. The API server labels every
// namespace kubernetes.io/metadata.name=<its name>, which is what the policies' namespace
// selectors read.
var namespaceNames = []string{"team-a", "kube-system", "gpu-system", "gpu-operator"}

// matches reports whether the API server's policy matcher sends attr to c's policy: the
// policy's matchConstraints, then its binding's matchResources (namespace selector
// included), both defaulted as the API server stores them.
func (c compiled) matches(t *testing.T, attr admission.Attributes) bool {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range namespaceNames {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelMetadataName: n}}}
		if err := indexer.Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	m := generic.NewPolicyMatcher(matching.NewMatcher(corelisters.NewNamespaceLister(indexer), fake.NewClientset()))
	o := admission.NewObjectInterfacesFromScheme(runtime.NewScheme())

	p := c.policy.DeepCopy()
	p.Spec.MatchConstraints = defaultMatch(p.Spec.MatchConstraints)
	ok, _, _, err := m.DefinitionMatches(attr, o, validating.NewValidatingAdmissionPolicyAccessor(p))
	if err != nil {
		t.Fatalf("policy %s: matching %s: %v", p.Name, attr.GetResource(), err)
	}
	if !ok || c.binding == nil {
		return ok
	}
	b := c.binding.DeepCopy()
	if b.Spec.MatchResources != nil {
		b.Spec.MatchResources = defaultMatch(b.Spec.MatchResources)
	}
	ok, err = m.BindingMatches(attr, o, validating.NewValidatingAdmissionPolicyBindingAccessor(b))
	if err != nil {
		t.Fatalf("binding %s: matching %s in %q: %v", b.Name, attr.GetResource(), attr.GetNamespace(), err)
	}
	return ok
}

// defaultMatch fills what the API server defaults in MatchResources: empty selectors (match
// everything) and the Equivalent match policy.
func defaultMatch(in *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
	out := in.DeepCopy()
	if out.NamespaceSelector == nil {
		out.NamespaceSelector = &metav1.LabelSelector{}
	}
	if out.ObjectSelector == nil {
		out.ObjectSelector = &metav1.LabelSelector{}
	}
	if out.MatchPolicy == nil {
		eq := admissionregistrationv1.Equivalent
		out.MatchPolicy = &eq
	}
	return out
}

// narrowsOnlyByNamespaceName checks that b leaves out nothing but the namespaces it names:
// a namespace selector with NotIn on kubernetes.io/metadata.name, which the API server sets
// and no one can change, so a namespace cannot exempt itself by a label. Errors name what
// else b narrows by.
func narrowsOnlyByNamespaceName(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	if b.Spec.ParamRef != nil {
		return fmt.Errorf("binding takes parameters (paramRef)")
	}
	mr := b.Spec.MatchResources
	if mr == nil {
		return nil
	}
	if mr.ObjectSelector != nil || len(mr.ResourceRules) > 0 || len(mr.ExcludeResourceRules) > 0 || mr.MatchPolicy != nil {
		return fmt.Errorf("binding narrows by more than the namespace: %+v", mr)
	}
	sel := mr.NamespaceSelector
	if sel == nil {
		return nil
	}
	if len(sel.MatchLabels) > 0 {
		return fmt.Errorf("namespace selector matches labels %v, which a namespace's owner may set", sel.MatchLabels)
	}
	for _, r := range sel.MatchExpressions {
		if r.Key != corev1.LabelMetadataName || r.Operator != metav1.LabelSelectorOpNotIn {
			return fmt.Errorf("namespace selector %s %s %v: want only %s NotIn", r.Key, r.Operator, r.Values, corev1.LabelMetadataName)
		}
	}
	return nil
}
