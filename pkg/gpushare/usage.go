package gpushare

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// AnnotationNodeUsage is the node annotation with the GPU memory the containers of the node
// use, per card (JSON Usage). share-plugin's usage watchdog writes it; `kubectl inspect
// gpushare -d` shows it next to what each pod was granted.
const AnnotationNodeUsage = "gpushare.io/gpu-usage"

// AnnotationOverGrant is the pod annotation share-plugin's usage watchdog writes, with
// --over-grant-action=annotate, when a container of the pod stays above its grant on a card
// (JSON OverGrant of the latest episode). It is not removed when use drops again. Tenants
// cannot write or remove it: it has the gpushare.io/ prefix the allocation-annotations
// admission policy guards.
const AnnotationOverGrant = "gpushare.io/over-grant"

// EventGPUMemoryOverGrant is the reason of the Warning event on a pod one of whose
// containers stayed above its grant on a card for the watchdog's grace period.
const EventGPUMemoryOverGrant = "GPUMemoryOverGrant"

// EventGPUMemoryUnclaimed is the reason of the Warning event on a pod whose processes use
// GPU memory on a card none of its containers was granted (or that requested no gpu-mem):
// share-plugin's usage watchdog finds the pod from the process's cgroup.
const EventGPUMemoryUnclaimed = "GPUMemoryUnclaimed"

// EventGPUMPSEscape is the reason of the Warning event on a pod one of whose processes holds
// a context of its own on a card of a node labelled LabelIsolation=IsolationMPS, outside the
// card's MPS server: no MPS memory limit holds it. share-plugin's usage watchdog tells it
// from NVML's process lists.
const EventGPUMPSEscape = "GPUMPSEscape"

// AnnotationMPSEscape is the pod annotation share-plugin's usage watchdog writes, with
// --mps-escape-action=annotate, when a process of the pod bypasses the card's MPS server on
// a node labelled IsolationMPS (JSON MPSEscape of the latest one). It is not removed when the
// process ends. Tenants cannot write or remove it: it has the gpushare.io/ prefix the
// allocation-annotations admission policy guards.
const AnnotationMPSEscape = "gpushare.io/mps-escape"

// MPSEscape is the JSON value of AnnotationMPSEscape: which container ran which host PID on
// which card outside MPS, since when.
type MPSEscape struct {
	Container string    `json:"container"` // empty when the pod's status does not name it yet
	Card      string    `json:"card"`      // the card's UUID
	PID       uint32    `json:"pid"`       // in the host's PID namespace
	Since     time.Time `json:"since"`
}

// UsageVersion is the version of Usage this package writes and reads.
const UsageVersion = 1

// Bounds of a Usage a reader accepts. The value is written by share-plugin (or anyone with
// patch on nodes), so a reader treats it as untrusted: at most the 256 KiB the API server
// allows for all of an object's annotations, and plausible amounts.
const (
	maxUsageBytes  = 256 << 10
	maxUsedMiB     = 1 << 30 // 1 PiB
	maxUsageName   = 253     // a DNS subdomain: namespace, pod and container names are shorter
	maxUsageUUID   = 128
	maxUsagePods   = 1024 // per card
	maxUsageCtrs   = 256  // per pod
	maxUsageCardID = MaxCardIndex
)

// Usage is the JSON value of AnnotationNodeUsage, e.g.
//
//	{"version":1,"time":"2026-11-24T06:00:00Z","cards":[{"index":0,"uuid":"GPU-…",
//	 "unattributedMiB":0,"pods":[{"namespace":"ml","name":"nb","uid":"…",
//	 "containers":[{"name":"main","usedMiB":5324}]}]}]}
//
// A card lists the containers that hold a grant on it or use memory on it; amounts are MiB
// as NVML reports the processes' use.
type Usage struct {
	Version int         `json:"version"`
	Time    time.Time   `json:"time"` // when the processes were listed
	Cards   []CardUsage `json:"cards"`
}

// CardUsage is one card of a Usage.
type CardUsage struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	// UnattributedMiB is what processes that map to no GPU-sharing pod of the node use:
	// host processes, pods that requested no gpu-mem, processes whose cgroup was unreadable.
	UnattributedMiB int64      `json:"unattributedMiB"`
	Pods            []PodUsage `json:"pods,omitempty"`
}

// PodUsage is one pod's containers on one card.
type PodUsage struct {
	Namespace  string           `json:"namespace"`
	Name       string           `json:"name"`
	UID        types.UID        `json:"uid"`
	Containers []ContainerUsage `json:"containers"`
}

// ContainerUsage is what one container's processes use on one card.
type ContainerUsage struct {
	Name    string `json:"name"`
	UsedMiB int64  `json:"usedMiB"`
	// Unknown: NVML could not tell the use of some of its processes; UsedMiB is a lower bound.
	Unknown bool `json:"unknown,omitempty"`
}

// OverGrant is the JSON value of AnnotationOverGrant: which container used how much on
// which card, against what grant, since when.
type OverGrant struct {
	Container  string    `json:"container"`
	Card       string    `json:"card"` // the card's UUID
	UsedMiB    int64     `json:"usedMiB"`
	GrantedMiB int64     `json:"grantedMiB"`
	Since      time.Time `json:"since"`
}

// Marshal encodes the usage as the annotation value; an error when it would exceed what
// ParseUsage accepts.
func (u Usage) Marshal() (string, error) {
	b, err := json.Marshal(u)
	if err != nil {
		return "", fmt.Errorf("encoding gpu usage: %w", err)
	}
	if len(b) > maxUsageBytes {
		return "", fmt.Errorf("gpu usage of %d bytes exceeds %d", len(b), maxUsageBytes)
	}
	return string(b), nil
}

// ParseUsage decodes and validates an AnnotationNodeUsage value. It fails closed: another
// version, a value over 256 KiB, duplicate cards or pods, empty or over-long names, negative
// or implausible amounts are errors, never a partial reading.
func ParseUsage(s string) (Usage, error) {
	fail := func(format string, a ...any) (Usage, error) {
		return Usage{}, fmt.Errorf("annotation %s: "+format, append([]any{AnnotationNodeUsage}, a...)...)
	}
	if len(s) > maxUsageBytes {
		return fail("%d bytes, at most %d", len(s), maxUsageBytes)
	}
	var u Usage
	if err := json.Unmarshal([]byte(s), &u); err != nil {
		return fail("%v", err)
	}
	if u.Version != UsageVersion {
		return fail("version %d, this reader knows %d", u.Version, UsageVersion)
	}
	if len(u.Cards) > maxUsageCardID {
		return fail("%d cards", len(u.Cards))
	}
	indexes, uuids := map[int]bool{}, map[string]bool{}
	for _, c := range u.Cards {
		switch {
		case c.Index < 0 || c.Index >= maxUsageCardID:
			return fail("card index %d out of range", c.Index)
		case indexes[c.Index]:
			return fail("card index %d appears twice", c.Index)
		case c.UUID == "" || len(c.UUID) > maxUsageUUID:
			return fail("card %d: UUID is empty or longer than %d", c.Index, maxUsageUUID)
		case uuids[c.UUID]:
			return fail("card UUID %q appears twice", c.UUID)
		case !plausibleMiB(c.UnattributedMiB):
			return fail("card %d: unattributedMiB %d out of range", c.Index, c.UnattributedMiB)
		case len(c.Pods) > maxUsagePods:
			return fail("card %d: %d pods", c.Index, len(c.Pods))
		}
		indexes[c.Index], uuids[c.UUID] = true, true
		if err := validatePods(c); err != nil {
			return fail("card %d: %v", c.Index, err)
		}
	}
	return u, nil
}

func validatePods(c CardUsage) error {
	pods := map[types.UID]bool{}
	for _, p := range c.Pods {
		switch {
		case !validName(p.Namespace) || !validName(p.Name):
			return fmt.Errorf("pod %q/%q: namespace or name empty or longer than %d", p.Namespace, p.Name, maxUsageName)
		case p.UID == "" || len(p.UID) > maxUsageUUID:
			return fmt.Errorf("pod %s/%s: uid empty or longer than %d", p.Namespace, p.Name, maxUsageUUID)
		case pods[p.UID]:
			return fmt.Errorf("pod %s/%s (uid %s) appears twice", p.Namespace, p.Name, p.UID)
		case len(p.Containers) > maxUsageCtrs:
			return fmt.Errorf("pod %s/%s: %d containers", p.Namespace, p.Name, len(p.Containers))
		}
		pods[p.UID] = true
		names := map[string]bool{}
		for _, k := range p.Containers {
			switch {
			case !validName(k.Name) || names[k.Name]:
				return fmt.Errorf("pod %s/%s: container name %q empty, too long or repeated", p.Namespace, p.Name, k.Name)
			case !plausibleMiB(k.UsedMiB):
				return fmt.Errorf("pod %s/%s container %s: usedMiB %d out of range", p.Namespace, p.Name, k.Name, k.UsedMiB)
			}
			names[k.Name] = true
		}
	}
	return nil
}

func validName(s string) bool   { return s != "" && len(s) <= maxUsageName }
func plausibleMiB(v int64) bool { return v >= 0 && v <= maxUsedMiB }
