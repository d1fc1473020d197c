package manifests_test

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	// gpushareSchedulerDir is the kustomization users apply (kubectl apply -k).
	gpushareSchedulerDir = "gpushare-scheduler"
	// gpushareSchedulerName is the profile's schedulerName, its Lease's and its objects' name.
	gpushareSchedulerName = "gpushare-scheduler"
	// gpushareSchedulerConfigKey is the file the configMapGenerator turns into the ConfigMap,
	// and so the key the config is mounted under.
	gpushareSchedulerConfigKey = "scheduler-config.yaml"
	// kubeSchedulerSecurePort is kube-scheduler's --secure-port default.
	kubeSchedulerSecurePort = 10259
)

// rendered is what `kubectl apply -k deploy/gpushare-scheduler` sends, decoded strictly.
type rendered struct {
	deployment appsv1.Deployment
	pdb        policyv1.PodDisruptionBudget
	configMaps []corev1.ConfigMap
	accounts   []corev1.ServiceAccount
	namespaced []metav1.ObjectMeta // every namespaced object
}

// renderGPUShareScheduler builds the kustomization with kustomize's own library (the one
// kubectl embeds), so generated names and the references kustomize rewrites are the ones
// users get.
func renderGPUShareScheduler(t *testing.T) rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), gpushareSchedulerDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", gpushareSchedulerDir, err)
	}
	var out rendered
	deployments := 0
	for _, r := range m.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		var obj any
		var meta *metav1.ObjectMeta
		switch r.GetKind() {
		case "Deployment":
			deployments++
			obj, meta = &out.deployment, &out.deployment.ObjectMeta
		case "PodDisruptionBudget":
			obj, meta = &out.pdb, &out.pdb.ObjectMeta
		case "ConfigMap":
			out.configMaps = append(out.configMaps, corev1.ConfigMap{})
			cm := &out.configMaps[len(out.configMaps)-1]
			obj, meta = cm, &cm.ObjectMeta
		case "ServiceAccount":
			out.accounts = append(out.accounts, corev1.ServiceAccount{})
			sa := &out.accounts[len(out.accounts)-1]
			obj, meta = sa, &sa.ObjectMeta
		case "Role":
			r := &rbacv1.Role{}
			obj, meta = r, &r.ObjectMeta
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			obj, meta = b, &b.ObjectMeta
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		default:
			t.Fatalf("%s: unexpected %s %s", gpushareSchedulerDir, r.GetKind(), r.GetName())
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			t.Fatalf("%s: %s %s: %v", gpushareSchedulerDir, r.GetKind(), r.GetName(), err)
		}
		if meta != nil {
			out.namespaced = append(out.namespaced, *meta)
		}
	}
	if deployments != 1 {
		t.Fatalf("%s renders %d Deployments, want 1", gpushareSchedulerDir, deployments)
	}
	return out
}

// TestGPUShareSchedulerDeployment: the kustomization runs gpushare-scheduler as a second
// scheduler in kube-system with the configuration it generates, two replicas on different
// nodes, probes on the secure port and the pod hardening of the other components.
func TestGPUShareSchedulerDeployment(t *testing.T) {
	r := renderGPUShareScheduler(t)
	config, err := os.ReadFile(path.Join(gpushareSchedulerDir, gpushareSchedulerConfigKey))
	if err != nil {
		t.Fatal(err)
	}
	spec := r.deployment.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("deployment has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	podLabels := labels.Set(r.deployment.Spec.Template.Labels)

	tests := []struct {
		name  string
		check func() error
	}{
		{"mounts the ConfigMap generated from scheduler-config.yaml where --config reads it", func() error {
			var cm *corev1.ConfigMap
			for i := range r.configMaps {
				if r.configMaps[i].Data[gpushareSchedulerConfigKey] != "" {
					cm = &r.configMaps[i]
				}
			}
			if cm == nil || cm.Data[gpushareSchedulerConfigKey] != string(config) {
				return fmt.Errorf("no generated ConfigMap holds %s as key %s", gpushareSchedulerConfigKey, gpushareSchedulerConfigKey)
			}
			var volume string
			for _, v := range spec.Volumes {
				if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
					volume = v.Name
				}
			}
			if volume == "" {
				return fmt.Errorf("volumes %+v: none mounts the generated ConfigMap %s (kustomize rewrites the name only if the Deployment names the generator's)", spec.Volumes, cm.Name)
			}
			for _, m := range c.VolumeMounts {
				if m.Name != volume {
					continue
				}
				want := []string{"/usr/bin/gpushare-scheduler", "--config=" + path.Join(m.MountPath, gpushareSchedulerConfigKey)}
				if got := append(slices.Clone(c.Command), c.Args...); !slices.Equal(got, want) {
					return fmt.Errorf("command %q, want %q", got, want)
				}
				if !m.ReadOnly || m.SubPath != "" {
					return fmt.Errorf("mount %+v: want the whole volume read-only (a subPath mount never sees an update)", m)
				}
				return nil
			}
			return fmt.Errorf("container mounts no volume %s", volume)
		}},
		{"every object in kube-system", func() error {
			for _, m := range r.namespaced {
				if m.Namespace != "kube-system" {
					return fmt.Errorf("%s is in namespace %q", m.Name, m.Namespace)
				}
			}
			return nil
		}},
		{"runs as the service account RBAC binds and the admission policy trusts", func() error {
			for _, sa := range r.accounts {
				if sa.Name == spec.ServiceAccountName && "system:serviceaccount:"+sa.Namespace+":"+sa.Name == gpushareSchedulerSA {
					return nil
				}
			}
			return fmt.Errorf("serviceAccountName %q: want %s, created by the kustomization", spec.ServiceAccountName, gpushareSchedulerSA)
		}},
		{"is itself placed by the default scheduler", func() error {
			if spec.SchedulerName != "" && spec.SchedulerName != corev1.DefaultSchedulerName {
				return fmt.Errorf("schedulerName %q: its own pods would wait for a scheduler that is not running", spec.SchedulerName)
			}
			return nil
		}},
		{"two replicas on different nodes", func() error {
			if r.deployment.Spec.Replicas == nil || *r.deployment.Spec.Replicas != 2 {
				return fmt.Errorf("replicas %v, want 2", r.deployment.Spec.Replicas)
			}
			aff := spec.Affinity
			if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				return fmt.Errorf("affinity %+v, want one required pod anti-affinity term", aff)
			}
			term := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
			if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err != nil || term.TopologyKey != corev1.LabelHostname || !sel.Matches(podLabels) {
				return fmt.Errorf("anti-affinity term %+v: want topologyKey %s selecting its own pods", term, corev1.LabelHostname)
			}
			if ru := r.deployment.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 0 {
				return fmt.Errorf("rolling update %+v: a surge pod needs a third node; want maxSurge 0", ru)
			}
			return nil
		}},
		{"probes kube-scheduler's secure port", func() error {
			if slices.ContainsFunc(append(slices.Clone(c.Command), c.Args...), func(a string) bool { return strings.HasPrefix(a, "--secure-port") }) {
				return fmt.Errorf("command %q moves the secure port the probes call", c.Command)
			}
			for _, p := range []struct {
				what  string
				probe *corev1.Probe
				path  string
			}{{"liveness", c.LivenessProbe, "/livez"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
				g := (*corev1.HTTPGetAction)(nil)
				if p.probe != nil {
					g = p.probe.HTTPGet
				}
				if g == nil || g.Path != p.path || g.Port.IntValue() != kubeSchedulerSecurePort || g.Scheme != corev1.URISchemeHTTPS || g.Host != "" {
					return fmt.Errorf("%s probe %+v, want HTTPS %s on %d", p.what, p.probe, p.path, kubeSchedulerSecurePort)
				}
			}
			return nil
		}},
		{"not root, no privilege escalation", func() error {
			psc, sc := spec.SecurityContext, c.SecurityContext
			nonRoot := (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot) || (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot)
			uid := (psc != nil && psc.RunAsUser != nil && *psc.RunAsUser != 0) || (sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != 0)
			if !nonRoot || !uid || sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				return fmt.Errorf("pod %+v, container %+v: want runAsNonRoot with a non-zero uid, no privilege escalation, a read-only root", psc, sc)
			}
			return nil
		}},
		{"requests resources, system-cluster-critical", func() error {
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				return fmt.Errorf("requests %v, want cpu and memory", c.Resources.Requests)
			}
			if spec.PriorityClassName != "system-cluster-critical" {
				return fmt.Errorf("priorityClassName %q, want system-cluster-critical", spec.PriorityClassName)
			}
			return nil
		}},
		{"a PodDisruptionBudget keeps one replica", func() error {
			if sel, err := metav1.LabelSelectorAsSelector(r.pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) {
				return fmt.Errorf("PDB selector %v does not select the pods (%v)", r.pdb.Spec.Selector, podLabels)
			}
			if r.pdb.Spec.MinAvailable == nil || r.pdb.Spec.MinAvailable.IntValue() != 1 {
				return fmt.Errorf("PDB minAvailable %v, want 1", r.pdb.Spec.MinAvailable)
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestGPUShareSchedulerConfig: the one profile is gpushare-scheduler, GPUShare binds before
// DefaultBinder, and leader election uses the Lease the RBAC grants.
func TestGPUShareSchedulerConfig(t *testing.T) {
	var cfg schedconfigv1.KubeSchedulerConfiguration
	decodeFile(t, path.Join(gpushareSchedulerDir, gpushareSchedulerConfigKey), &cfg)
	if len(cfg.Profiles) != 1 {
		t.Fatalf("%d profiles, want 1", len(cfg.Profiles))
	}
	prof := cfg.Profiles[0]
	le := cfg.LeaderElection

	tests := []struct {
		name  string
		check func() error
	}{
		{"profile gpushare-scheduler", func() error {
			if prof.SchedulerName == nil || *prof.SchedulerName != gpushareSchedulerName {
				return fmt.Errorf("schedulerName %v, want %s (the name pods opt in with)", prof.SchedulerName, gpushareSchedulerName)
			}
			return nil
		}},
		{"leader election on its own Lease", func() error {
			if le.LeaderElect == nil || !*le.LeaderElect || le.ResourceName != gpushareSchedulerName || le.ResourceNamespace != "kube-system" ||
				(le.ResourceLock != "" && le.ResourceLock != "leases") {
				return fmt.Errorf("leaderElection %+v, want on, Lease kube-system/%s (kube-scheduler holds kube-system/kube-scheduler)", le, gpushareSchedulerName)
			}
			return nil
		}},
		{"GPUShare binds before DefaultBinder", func() error {
			if prof.Plugins == nil {
				return fmt.Errorf("no plugins")
			}
			names := func(ps []schedconfigv1.Plugin) []string {
				var out []string
				for _, p := range ps {
					out = append(out, p.Name)
				}
				return out
			}
			bind := prof.Plugins.Bind
			disabled, enabled := names(bind.Disabled), names(bind.Enabled)
			// Without disabling it, DefaultBinder stays first among the defaults and binds
			// every pod before GPUShare is asked.
			if !slices.Contains(disabled, "DefaultBinder") && !slices.Contains(disabled, "*") {
				return fmt.Errorf("bind.disabled %v lacks DefaultBinder", disabled)
			}
			g, d := slices.Index(enabled, "GPUShare"), slices.Index(enabled, "DefaultBinder")
			if g < 0 || d < 0 || g > d {
				return fmt.Errorf("bind.enabled %v, want GPUShare before DefaultBinder", enabled)
			}
			if !slices.Contains(names(prof.Plugins.MultiPoint.Enabled), "GPUShare") {
				return fmt.Errorf("multiPoint.enabled %v lacks GPUShare", names(prof.Plugins.MultiPoint.Enabled))
			}
			return nil
		}},
		{"DynamicResources stays enabled", func() error {
			// It filters, allocates and prebinds claim pods; GPUShare narrows and scores them.
			p := prof.Plugins
			if p == nil {
				return nil
			}
			for _, set := range []schedconfigv1.PluginSet{p.MultiPoint, p.PreEnqueue, p.QueueSort, p.PreFilter, p.Filter, p.PostFilter,
				p.PreScore, p.Score, p.Reserve, p.Permit, p.PreBind, p.PostBind} {
				for _, d := range set.Disabled {
					if d.Name == "DynamicResources" || d.Name == "*" {
						return fmt.Errorf("%s disabled", d.Name)
					}
				}
			}
			return nil
		}},
		{"GPUShare has its args", func() error {
			for _, pc := range prof.PluginConfig {
				if pc.Name != "GPUShare" {
					continue
				}
				var tm metav1.TypeMeta
				if err := yaml.Unmarshal(pc.Args.Raw, &tm); err != nil || tm.Kind != "GPUShareArgs" {
					return fmt.Errorf("GPUShare args %s: want kind GPUShareArgs (%v)", pc.Args.Raw, err)
				}
				return nil
			}
			return fmt.Errorf("no pluginConfig for GPUShare")
		}},
		{"the RBAC grants get and update on that Lease", func() error {
			got := grants(t, path.Join(gpushareSchedulerDir, "rbac.yaml"), gpushareSchedulerSA)
			for _, v := range []string{"get", "update"} {
				want := le.ResourceNamespace + ": coordination.k8s.io/leases " + v + " " + le.ResourceName
				if !slices.Contains(got, want) {
					return fmt.Errorf("grants %v lack %q", got, want)
				}
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.check(); err != nil {
				t.Error(err)
			}
		})
	}
}
