package gpushare

import (
	"fmt"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
)

// Pod annotations by which a pod chooses or avoids cards, each a comma-separated list. A type
// matches a card whose product name (Device.Model, as share-plugin publishes it) contains it,
// ignoring case; a UUID matches a card whose Device.UUID is exactly it. The nvidia.com names
// are those HAMi users know; the gpushare.io names say the same. A card must pass every
// annotation the pod carries.
const (
	AnnotationUseGPUType       = "gpushare.io/use-gputype"
	AnnotationAvoidGPUType     = "gpushare.io/nouse-gputype"
	AnnotationUseGPUUUID       = "gpushare.io/use-gpuuuid"
	AnnotationAvoidGPUUUID     = "gpushare.io/nouse-gpuuuid"
	AnnotationHAMiUseGPUType   = "nvidia.com/use-gputype"
	AnnotationHAMiAvoidGPUType = "nvidia.com/nouse-gputype"
	AnnotationHAMiUseGPUUUID   = "nvidia.com/use-gpuuuid"
	AnnotationHAMiAvoidGPUUUID = "nvidia.com/nouse-gpuuuid"
)

// AnnotationCardPolicy chooses, for this pod only, how its containers are spread over a
// node's cards: "binpack" (fullest fitting card first) or "spread" (emptiest first), in place
// of the scheduler's placement policy.
const AnnotationCardPolicy = "gpushare.io/card-policy"

// The card-policy values.
const (
	CardPolicyBinpack = "binpack"
	CardPolicySpread  = "spread"
)

// Bounds of the card annotations, which tenants write: filter quotes them in every node's
// reason.
const (
	maxCardChoiceValueBytes = 1024 // one annotation's value
	maxCardChoiceEntries    = 16   // entries of one annotation
	maxCardChoiceEntryBytes = 128  // one type or UUID
	maxQuotedBytes          = 64   // of a rejected value, in an error
)

// cardRuleKinds lists the card annotations in the order a CardChoice holds and describes them.
var cardRuleKinds = []struct {
	key          string
	avoid, uuids bool
}{
	{AnnotationHAMiUseGPUType, false, false},
	{AnnotationUseGPUType, false, false},
	{AnnotationHAMiAvoidGPUType, true, false},
	{AnnotationAvoidGPUType, true, false},
	{AnnotationHAMiUseGPUUUID, false, true},
	{AnnotationUseGPUUUID, false, true},
	{AnnotationHAMiAvoidGPUUUID, true, true},
	{AnnotationAvoidGPUUUID, true, true},
}

// CardChoiceAnnotationKeys lists every pod annotation ParseCardChoice reads: tenants write
// them (the admission policy that guards allocation records lets them through).
func CardChoiceAnnotationKeys() []string {
	out := []string{AnnotationCardPolicy}
	for _, k := range cardRuleKinds {
		out = append(out, k.key)
	}
	return out
}

// CardRule is one card annotation of a pod: a card passes when it matches one of Values
// (Avoid false) or none of them (Avoid true).
type CardRule struct {
	Key    string   // the annotation
	Avoid  bool     // nouse-*: the listed cards are excluded
	UUIDs  bool     // *-gpuuuid: Values are UUIDs, matched exactly; else types, matched as substrings
	Values []string // as written, trimmed; for types also compared lower-cased
	lower  []string // Values lower-cased, for types
}

// matches reports whether the card matches one of r's values.
func (r CardRule) matches(model, uuid string) bool {
	if r.UUIDs {
		for _, v := range r.Values {
			if uuid == v {
				return true
			}
		}
		return false
	}
	m := strings.ToLower(model)
	for _, v := range r.lower {
		if strings.Contains(m, v) {
			return true
		}
	}
	return false
}

// describe is the rule in words after "card": "of type A100 or H100", "with UUID GPU-1".
func (r CardRule) describe() string {
	what := "of type "
	if r.UUIDs {
		what = "with UUID "
	}
	if r.Avoid {
		what = "not " + what
	}
	return what + strings.Join(r.Values, " or ")
}

// CardChoice is what a pod says about its cards: which it may use (Rules) and how its
// containers are spread over them (Policy). A nil *CardChoice says nothing: any card, the
// scheduler's policy.
type CardChoice struct {
	// Rules are the card annotations the pod carries; a card must pass all of them.
	Rules []CardRule
	// Policy is the card-policy annotation: "binpack", "spread", or "" for the scheduler's.
	Policy string
}

// Restricts reports whether c excludes any card.
func (c *CardChoice) Restricts() bool { return c != nil && len(c.Rules) > 0 }

// Allows reports whether the card with product name model and UUID uuid passes every rule.
// A nil c allows every card.
func (c *CardChoice) Allows(model, uuid string) bool {
	if c == nil {
		return true
	}
	for _, r := range c.Rules {
		if r.matches(model, uuid) == r.Avoid {
			return false
		}
	}
	return true
}

// Describe is the card restriction in words after "card", for reasons: "of type A100",
// or several rules in parentheses, "(of type A100; not with UUID GPU-1)". "" without rules.
func (c *CardChoice) Describe() string {
	if !c.Restricts() {
		return ""
	}
	if len(c.Rules) == 1 {
		return c.Rules[0].describe()
	}
	parts := make([]string, len(c.Rules))
	for i, r := range c.Rules {
		parts[i] = r.describe()
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

// Annotations lists what c was read from as "key=value" ("card-policy" first), for inspect.
func (c *CardChoice) Annotations() []string {
	if c == nil {
		return nil
	}
	var out []string
	if c.Policy != "" {
		out = append(out, AnnotationCardPolicy+"="+c.Policy)
	}
	for _, r := range c.Rules {
		out = append(out, r.Key+"="+strings.Join(r.Values, ","))
	}
	return out
}

// ParseCardChoice reads a pod's card annotations (tenant-written: every value is bounded and
// checked). It returns nil when the pod carries none. Errors name the annotation and what is
// wrong with it: an empty list or entry, too many or too long entries, a control character,
// a UUID with a space, or a card-policy other than binpack or spread.
func ParseCardChoice(annotations map[string]string) (*CardChoice, error) {
	var c CardChoice
	if v, ok := annotations[AnnotationCardPolicy]; ok {
		switch v {
		case CardPolicyBinpack, CardPolicySpread:
			c.Policy = v
		default:
			return nil, fmt.Errorf("annotation %s=%q: want %s or %s",
				AnnotationCardPolicy, clip(v), CardPolicyBinpack, CardPolicySpread)
		}
	}
	for _, k := range cardRuleKinds {
		v, ok := annotations[k.key]
		if !ok {
			continue
		}
		values, err := parseCardList(v, k.uuids)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", k.key, err)
		}
		r := CardRule{Key: k.key, Avoid: k.avoid, UUIDs: k.uuids, Values: values}
		if !k.uuids {
			r.lower = make([]string, len(values))
			for i, s := range values {
				r.lower[i] = strings.ToLower(s)
			}
		}
		c.Rules = append(c.Rules, r)
	}
	if c.Policy == "" && len(c.Rules) == 0 {
		return nil, nil
	}
	return &c, nil
}

// parseCardList splits a comma-separated list of types or UUIDs, trimming spaces.
func parseCardList(v string, uuids bool) ([]string, error) {
	if len(v) > maxCardChoiceValueBytes {
		return nil, fmt.Errorf("value is %d bytes, above the limit of %d", len(v), maxCardChoiceValueBytes)
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxCardChoiceEntries {
		return nil, fmt.Errorf("%d entries, above the limit of %d", len(parts), maxCardChoiceEntries)
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
			return nil, fmt.Errorf("%q has an empty entry", clip(v))
		case len(p) > maxCardChoiceEntryBytes:
			return nil, fmt.Errorf("entry %q is longer than %d bytes", clip(p), maxCardChoiceEntryBytes)
		case strings.IndexFunc(p, unicode.IsControl) >= 0:
			return nil, fmt.Errorf("entry %q has a control character", clip(p))
		case uuids && strings.IndexFunc(p, unicode.IsSpace) >= 0:
			return nil, fmt.Errorf("UUID %q has a space", clip(p))
		}
		out = append(out, p)
	}
	return out, nil
}

// clip shortens a tenant-written value quoted in an error.
func clip(s string) string {
	if len(s) <= maxQuotedBytes {
		return s
	}
	return s[:maxQuotedBytes] + "…"
}

// PlacementRequest is what placing the pod takes into account: its gpu-mem request
// (PodRequest) with its card choice (ParseCardChoice) in Choice, its containers' memory
// limits (WithMemLimits) and compute shares (WithComputeShares). The schedulers' filter,
// score and bind read it, and share-plugin's Allocate; accounting of placed pods reads
// PodRequest and the compute shares alone, so neither a card annotation nor a limit ever
// changes what a placed pod counts. Errors: PodRequest's, or a card, limit or compute
// annotation that does not parse or does not fit the request (a limit or share on a pod
// without gpu-mem too).
func (r Resources) PlacementRequest(pod *corev1.Pod) (PodRequest, error) {
	req, err := r.PodRequest(pod)
	if err != nil {
		return req, err
	}
	if req, err = WithMemLimits(pod, req); err != nil {
		return req, err
	}
	if req, err = WithComputeShares(pod, req); err != nil || req.IsZero() {
		return req, err
	}
	if req.Choice, err = ParseCardChoice(pod.Annotations); err != nil {
		return PodRequest{}, err
	}
	return req, nil
}
