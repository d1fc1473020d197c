package schedulerplugin

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// ArgsKind is the kind of GPUShare's arguments in a KubeSchedulerConfiguration's
// pluginConfig, in the configuration's own group and version (ArgsGroupVersion), as the
// in-tree plugins' <Name>Args are.
const ArgsKind = Name + "Args"

// ArgsGroupVersion is the apiVersion GPUShareArgs may carry.
var ArgsGroupVersion = schema.GroupVersion{Group: "kubescheduler.config.k8s.io", Version: "v1"}

// GPUShareArgs are GPUShare's arguments (pluginConfig[].args of the plugin named GPUShare).
// Every field is optional; SetDefaults fills them as the extender's flags default, and
// Validate checks them.
type GPUShareArgs struct {
	metav1.TypeMeta `json:",inline"`
	// Policy places pods on cards: binpack, bestfit, spread or fgd (default fgd, as the
	// extender's --policy).
	Policy string `json:"policy,omitempty"`
	// NodeSelector is the label selector of GPU-sharing nodes (default cgpu=true); the
	// plugin accounts the cards of these nodes only and filters every other node out of
	// pods that request gpu-mem.
	NodeSelector string `json:"nodeSelector,omitempty"`
	// MemResource is the extended resource pods request GPU memory units with (default
	// aliyun.com/gpu-mem); CountResource the one giving cards per container (default
	// aliyun.com/gpu-count).
	MemResource   string `json:"memResource,omitempty"`
	CountResource string `json:"countResource,omitempty"`
	// ReservationTTL is how long cards held at Reserve wait for their pod to show up bound
	// before expiry asks the API server whether it is (default 2m).
	ReservationTTL *metav1.Duration `json:"reservationTTL,omitempty"`
	// UnrecordedGrace is how long a placed pod without a valid allocation record (created
	// with spec.nodeName, say) counts on every card of its node before it counts against the
	// node's free units as a whole, with a Warning event (default 2m).
	UnrecordedGrace *metav1.Duration `json:"unrecordedGrace,omitempty"`
	// BindTimeout bounds the Binding write and, separately, the read-back settling a failed
	// one (default 30s).
	BindTimeout *metav1.Duration `json:"bindTimeout,omitempty"`
	// ClaimNarrowing turns on PreFilter's narrowing of pods with gpushare ResourceClaims to
	// the DRA nodes that hold them (default true; see narrowDRA).
	ClaimNarrowing *bool `json:"claimNarrowing,omitempty"`
	// ClaimNodesToRate is how many nodes that narrowing rates, from a rotating start, before
	// it rates them all (default 500; 0: every node, as percentageOfNodesToScore 100 scores
	// every node).
	ClaimNodesToRate *int32 `json:"claimNodesToRate,omitempty"`
	// MemNarrowing turns on PreFilter's narrowing of pods that request gpu-mem, under fgd and
	// binpack, to the nodes whose cards the policy rates best for them (default true; see
	// narrowMem).
	MemNarrowing *bool `json:"memNarrowing,omitempty"`
}

// DefaultClaimNodesToRate is ClaimNodesToRate's default: kube-scheduler's own share of a
// 5000-node cluster (it filters nodes from a rotating start until it has found 10% of them
// feasible, and scores those).
const DefaultClaimNodesToRate = 500

// SetDefaults fills the fields left empty.
func SetDefaults(a *GPUShareArgs) {
	def := gpushare.DefaultResources()
	if a.Policy == "" {
		a.Policy = policy.Default
	}
	if a.NodeSelector == "" {
		a.NodeSelector = gpushare.NodeLabelKey + "=" + gpushare.NodeLabelValue
	}
	if a.MemResource == "" {
		a.MemResource = string(def.Mem)
	}
	if a.CountResource == "" {
		a.CountResource = string(def.Count)
	}
	if a.ReservationTTL == nil {
		a.ReservationTTL = &metav1.Duration{Duration: cache.DefaultReservationTTL}
	}
	if a.UnrecordedGrace == nil {
		a.UnrecordedGrace = &metav1.Duration{Duration: cache.DefaultUnrecordedGrace}
	}
	if a.BindTimeout == nil {
		a.BindTimeout = &metav1.Duration{Duration: binding.DefaultBindTimeout}
	}
	if a.ClaimNarrowing == nil {
		a.ClaimNarrowing = ptr.To(true)
	}
	if a.ClaimNodesToRate == nil {
		a.ClaimNodesToRate = ptr.To[int32](DefaultClaimNodesToRate)
	}
	if a.MemNarrowing == nil {
		a.MemNarrowing = ptr.To(true)
	}
}

// Validate checks defaulted arguments; path is where they sit in the configuration
// (e.g. profiles[0].pluginConfig[1].args). The error aggregates every field error.
func Validate(path *field.Path, a *GPUShareArgs) error {
	var errs field.ErrorList
	if a.APIVersion != "" && a.APIVersion != ArgsGroupVersion.String() {
		errs = append(errs, field.NotSupported(path.Child("apiVersion"), a.APIVersion, []string{ArgsGroupVersion.String()}))
	}
	if a.Kind != "" && a.Kind != ArgsKind {
		errs = append(errs, field.NotSupported(path.Child("kind"), a.Kind, []string{ArgsKind}))
	}
	if _, err := policy.New(a.Policy); err != nil {
		errs = append(errs, field.NotSupported(path.Child("policy"), a.Policy, policy.Names()))
	}
	if _, err := labels.Parse(a.NodeSelector); err != nil {
		errs = append(errs, field.Invalid(path.Child("nodeSelector"), a.NodeSelector, err.Error()))
	}
	for _, r := range []struct{ name, v string }{{"memResource", a.MemResource}, {"countResource", a.CountResource}} {
		for _, msg := range validation.IsQualifiedName(r.v) {
			errs = append(errs, field.Invalid(path.Child(r.name), r.v, msg))
		}
	}
	if err := a.resources().Validate(); err != nil {
		errs = append(errs, field.Invalid(path.Child("countResource"), a.CountResource, err.Error()))
	}
	for _, d := range []struct {
		name string
		v    *metav1.Duration
	}{{"reservationTTL", a.ReservationTTL}, {"unrecordedGrace", a.UnrecordedGrace}, {"bindTimeout", a.BindTimeout}} {
		if d.v == nil || d.v.Duration <= 0 {
			errs = append(errs, field.Invalid(path.Child(d.name), durationString(d.v), "must be a positive duration"))
		} else if d.v.Duration > 24*time.Hour {
			errs = append(errs, field.Invalid(path.Child(d.name), d.v.Duration.String(), "must be at most 24h"))
		}
	}
	if n := a.ClaimNodesToRate; n == nil || *n < 0 {
		errs = append(errs, field.Invalid(path.Child("claimNodesToRate"), ptr.Deref(n, -1), "must be 0 (every node) or more"))
	}
	return errs.ToAggregate()
}

func durationString(d *metav1.Duration) string {
	if d == nil {
		return "<unset>"
	}
	return d.Duration.String()
}

// decodeArgs reads the plugin's arguments as kube-scheduler hands them to the factory: nil
// when the configuration has none, *runtime.Unknown (the raw JSON of an out-of-tree
// plugin's args) otherwise, or *GPUShareArgs from a caller that built them. Unknown fields
// are errors: a misspelt setting must not be silently ignored. The result is defaulted and
// validated.
func decodeArgs(obj runtime.Object) (*GPUShareArgs, error) {
	args := &GPUShareArgs{}
	switch o := obj.(type) {
	case nil:
	case *GPUShareArgs:
		args = o.DeepCopy()
	case *runtime.Unknown:
		if len(o.Raw) > 0 {
			if err := yaml.UnmarshalStrict(o.Raw, args); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", ArgsKind, err)
			}
		}
	default:
		return nil, fmt.Errorf("%s: want args of kind %s, got %T", Name, ArgsKind, obj)
	}
	SetDefaults(args)
	path := field.NewPath("pluginConfig").Key(Name).Child("args")
	if err := Validate(path, args); err != nil {
		return nil, fmt.Errorf("invalid %s: %w", ArgsKind, err)
	}
	return args, nil
}

// resources is the resource naming of valid args.
func (a *GPUShareArgs) resources() gpushare.Resources {
	return gpushare.Resources{Mem: corev1.ResourceName(a.MemResource), Count: corev1.ResourceName(a.CountResource)}
}

// DeepCopy returns a copy sharing nothing with a.
func (a *GPUShareArgs) DeepCopy() *GPUShareArgs {
	if a == nil {
		return nil
	}
	out := *a
	if a.ReservationTTL != nil {
		d := *a.ReservationTTL
		out.ReservationTTL = &d
	}
	if a.UnrecordedGrace != nil {
		d := *a.UnrecordedGrace
		out.UnrecordedGrace = &d
	}
	if a.BindTimeout != nil {
		d := *a.BindTimeout
		out.BindTimeout = &d
	}
	if a.ClaimNarrowing != nil {
		out.ClaimNarrowing = ptr.To(*a.ClaimNarrowing)
	}
	if a.ClaimNodesToRate != nil {
		out.ClaimNodesToRate = ptr.To(*a.ClaimNodesToRate)
	}
	if a.MemNarrowing != nil {
		out.MemNarrowing = ptr.To(*a.MemNarrowing)
	}
	return &out
}

// DeepCopyObject implements runtime.Object.
func (a *GPUShareArgs) DeepCopyObject() runtime.Object { return a.DeepCopy() }
