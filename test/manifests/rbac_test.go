package manifests_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/leader"
)

// grants flattens the rules of the ClusterRoles bound to the service account in file into
// sorted "group/resource verb" strings ("" group written as core), then those of the Roles
// bound to it as "namespace: group/resource verb", with " name" per resourceNames entry. A
// bound role the file does not define (a built-in one of the API server's bootstrap policy)
// is written as "ClusterRole name" or "namespace: Role name".
func grants(t *testing.T, file, serviceAccount string) []string {
	t.Helper()
	docs, err := docsOf(file)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]rbacv1.ClusterRole{}
	nsRoles := map[string]rbacv1.Role{} // by namespace/name
	var bound, nsBound []string
	for _, d := range docs {
		doc := d.raw
		switch d.kind {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(doc, &cr); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			roles[cr.Name] = cr
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict(doc, &r); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			nsRoles[r.Namespace+"/"+r.Name] = r
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if b.RoleRef.Kind != "Role" {
				t.Fatalf("%s: RoleBinding %s binds a %s, want only Roles", file, b.Name, b.RoleRef.Kind)
			}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && "system:serviceaccount:"+s.Namespace+":"+s.Name == serviceAccount {
					nsBound = append(nsBound, b.Namespace+"/"+b.RoleRef.Name)
				}
			}
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict(doc, &b); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && "system:serviceaccount:"+s.Namespace+":"+s.Name == serviceAccount {
					bound = append(bound, b.RoleRef.Name)
				}
			}
		}
	}
	if len(bound) == 0 {
		t.Fatalf("%s: %s is bound to no ClusterRole", file, serviceAccount)
	}
	var out []string
	for _, name := range bound {
		role, ok := roles[name]
		if !ok {
			out = append(out, "ClusterRole "+name)
			continue
		}
		for _, rule := range role.Rules {
			if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s: rule %v: resourceNames/nonResourceURLs are not expected", file, rule)
			}
			for _, g := range rule.APIGroups {
				if g == "" {
					g = "core"
				}
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, g+"/"+res+" "+v)
					}
				}
			}
		}
	}
	slices.Sort(out)
	var namespaced []string
	for _, key := range nsBound {
		r, ok := nsRoles[key]
		if !ok {
			ns, name, _ := strings.Cut(key, "/")
			namespaced = append(namespaced, ns+": Role "+name)
			continue
		}
		for _, rule := range r.Rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						for _, n := range names {
							namespaced = append(namespaced, strings.TrimSpace(r.Namespace+": "+g+"/"+res+" "+v+" "+n))
						}
					}
				}
			}
		}
	}
	slices.Sort(namespaced)
	return append(out, namespaced...)
}

// TestRBAC: each component is granted exactly what its code uses (the comments in the
// rbac.yaml files say where), no wildcard and nothing more.
func TestRBAC(t *testing.T) {
	tests := []struct {
		name, file, serviceAccount string
		want                       []string
	}{
		{"extender", "extender/rbac.yaml", extenderSA, []string{
			"core/events create", "core/events patch",
			"core/nodes list", "core/nodes watch",
			"core/pods get", "core/pods list", "core/pods patch", "core/pods watch",
			"core/pods/binding create",
			// --leader-elect: its own Lease only, but create cannot be limited by name.
			leader.DefaultNamespace + ": coordination.k8s.io/leases create",
			leader.DefaultNamespace + ": coordination.k8s.io/leases get " + leader.DefaultName,
			leader.DefaultNamespace + ": coordination.k8s.io/leases update " + leader.DefaultName,
		}},
		{"gpushare-scheduler", "gpushare-scheduler/rbac.yaml", gpushareSchedulerSA, []string{
			// kube-scheduler's own built-in roles; system:kube-scheduler reaches only the
			// Lease named kube-scheduler.
			"ClusterRole system:kube-scheduler", "ClusterRole system:volume-scheduler",
			// Bind's removal of stale allocation annotations.
			"core/pods patch",
			// Delegated authentication of its secure port.
			"kube-system: Role extension-apiserver-authentication-reader",
			// Its own leader election Lease.
			"kube-system: coordination.k8s.io/leases create",
			"kube-system: coordination.k8s.io/leases get gpushare-scheduler",
			"kube-system: coordination.k8s.io/leases update gpushare-scheduler",
		}},
		{"share-plugin", "share-plugin/rbac.yaml", sharePluginSA, []string{
			"core/events create", "core/events patch",
			"core/nodes get", "core/nodes patch",
			"core/nodes/status patch",
			"core/pods list", "core/pods patch", "core/pods watch",
		}},
		{"dra-plugin", "dra/rbac.yaml", draPluginSA, []string{
			"core/events create", "core/events patch",
			"core/nodes get", "core/nodes patch",
			// At start: no pod of the node may still hold device-plugin memory.
			"core/pods list",
			"resource.k8s.io/resourceclaims get",
			"resource.k8s.io/resourceslices create", "resource.k8s.io/resourceslices delete",
			"resource.k8s.io/resourceslices list", "resource.k8s.io/resourceslices update",
			"resource.k8s.io/resourceslices watch",
		}},
		// --over-grant-action=evict only: apart, since the node-scope policy cannot check it.
		{"share-plugin evict", "share-plugin/rbac-evict.yaml", sharePluginSA, []string{
			"core/pods/eviction create",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := grants(t, tc.file, tc.serviceAccount)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s grants (-want,+got):\n%s", tc.file, diff)
			}
			for _, g := range got {
				if strings.Contains(g, "*") {
					t.Errorf("%s: wildcard grant %q", tc.file, g)
				}
			}
		})
	}
}
