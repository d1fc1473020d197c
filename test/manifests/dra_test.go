package manifests_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draObjects decodes every document of the DRA manifests strictly (an unknown or misspelt
// field fails), by kind.
type draObjects struct {
	classes   []resourceapi.DeviceClass
	claims    []resourceapi.ResourceClaim
	templates []resourceapi.ResourceClaimTemplate
	pods      []corev1.PodSpec // pods' and Deployments' pod specs
}

func decodeDRA(t *testing.T, files ...string) draObjects {
	t.Helper()
	var o draObjects
	for _, file := range files {
		docs, err := docsOf(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			var err error
			switch d.kind {
			case "DeviceClass":
				err = decodeAppend(d.raw, &o.classes)
			case "ResourceClaim":
				err = decodeAppend(d.raw, &o.claims)
			case "ResourceClaimTemplate":
				err = decodeAppend(d.raw, &o.templates)
			case "Pod":
				var p corev1.Pod
				err = yaml.UnmarshalStrict(d.raw, &p)
				o.pods = append(o.pods, p.Spec)
			case "Deployment":
				var dep appsv1.Deployment
				err = yaml.UnmarshalStrict(d.raw, &dep)
				o.pods = append(o.pods, dep.Spec.Template.Spec)
			default:
				t.Errorf("%s#%d: unexpected kind %q", file, i, d.kind)
			}
			if err != nil {
				t.Errorf("%s#%d (%s): %v", file, i, d.kind, err)
			}
		}
	}
	return o
}

// decodeAppend decodes raw strictly and appends it to dst.
func decodeAppend[T any](raw []byte, dst *[]T) error {
	var v T
	err := yaml.UnmarshalStrict(raw, &v)
	*dst = append(*dst, v)
	return err
}

// TestDRADeviceClass: the class is named after the driver and selects its devices.
func TestDRADeviceClass(t *testing.T) {
	o := decodeDRA(t, "dra/deviceclass.yaml")
	if len(o.classes) != 1 {
		t.Fatalf("%d DeviceClasses, want 1", len(o.classes))
	}
	c := o.classes[0]
	if c.Name != gpushare.DRADriverName {
		t.Errorf("DeviceClass %q, want %q", c.Name, gpushare.DRADriverName)
	}
	want := `device.driver == "` + gpushare.DRADriverName + `"`
	if len(c.Spec.Selectors) != 1 || c.Spec.Selectors[0].CEL == nil || c.Spec.Selectors[0].CEL.Expression != want {
		t.Errorf("selectors %+v, want one CEL selector %s", c.Spec.Selectors, want)
	}
}

// TestDRAExamples: every request names the class and asks memory in whole GiB; the
// two-card claim keeps its shares on distinct cards; every pod claim a container names
// exists and points at a claim or template of the same file set.
func TestDRAExamples(t *testing.T) {
	o := decodeDRA(t, "dra/examples/tf-notebook-claims.yaml", "dra/examples/two-card-claim.yaml", "dra/examples/shared-claim-pod.yaml")
	specs := map[string]resourceapi.ResourceClaimSpec{}
	for _, c := range o.claims {
		specs["claim/"+c.Name] = c.Spec
	}
	for _, tmpl := range o.templates {
		specs["template/"+tmpl.Name] = tmpl.Spec.Spec
	}
	if len(o.claims) != 1 || len(o.templates) != 2 || len(o.pods) != 3 {
		t.Fatalf("%d claims, %d templates, %d pods; want 1, 2, 3", len(o.claims), len(o.templates), len(o.pods))
	}
	for name, spec := range specs {
		for _, r := range spec.Devices.Requests {
			if r.Exactly == nil || r.Exactly.DeviceClassName != gpushare.DRADriverName {
				t.Errorf("%s request %s: want exactly with class %s", name, r.Name, gpushare.DRADriverName)
				continue
			}
			mem, ok := r.Exactly.Capacity.Requests[gpushare.DRACapacityMemory]
			if !ok || mem.Value() <= 0 || mem.Value()%(1<<30) != 0 {
				t.Errorf("%s request %s: capacity.requests.%s %v, want whole GiB", name, r.Name, gpushare.DRACapacityMemory, mem.String())
			}
		}
	}
	if mem := specs["template/gpu-mem-4gi"].Devices.Requests[0].Exactly.Capacity.Requests[gpushare.DRACapacityMemory]; mem.Cmp(resource.MustParse("4Gi")) != 0 {
		t.Errorf("the reference notebook asks %s, want 4Gi", mem.String())
	}
	two := specs["claim/two-cards"].Devices
	wantDistinct := gpushare.DRADriverName + "/" + gpushare.DRAAttributeUUID
	if two.Requests[0].Exactly.Count != 2 || len(two.Constraints) != 1 || two.Constraints[0].DistinctAttribute == nil ||
		string(*two.Constraints[0].DistinctAttribute) != wantDistinct {
		t.Errorf("two-card claim %+v: want count 2 and distinctAttribute %s", two, wantDistinct)
	}
	shared := 0
	for _, p := range o.pods {
		byName := map[string]corev1.PodResourceClaim{}
		for _, rc := range p.ResourceClaims {
			byName[rc.Name] = rc
			var key string
			switch {
			case rc.ResourceClaimName != nil:
				key = "claim/" + *rc.ResourceClaimName
			case rc.ResourceClaimTemplateName != nil:
				key = "template/" + *rc.ResourceClaimTemplateName
			}
			if _, ok := specs[key]; !ok {
				t.Errorf("pod claim %s points at %q, which no example defines", rc.Name, key)
			}
		}
		users := 0
		for _, c := range p.Containers {
			for _, cl := range c.Resources.Claims {
				if _, ok := byName[cl.Name]; !ok {
					t.Errorf("container %s names claim %s, which its pod does not have", c.Name, cl.Name)
				}
				users++
			}
			if _, ok := c.Resources.Limits[gpushare.DefaultMemResource]; ok {
				t.Errorf("container %s asks %s too", c.Name, gpushare.DefaultMemResource)
			}
		}
		if users > 1 && len(p.ResourceClaims) == 1 {
			shared++
		}
	}
	if shared != 1 {
		t.Errorf("%d pods whose containers share one claim, want 1", shared)
	}
}
