package watchdog

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// OverGrantAction is what the watchdog does, beyond its event and counter, about a
// container that stays above its grant.
type OverGrantAction string

const (
	// OverGrantNone: the event and the counter only.
	OverGrantNone OverGrantAction = "none"
	// OverGrantAnnotate: also gpushare.AnnotationOverGrant on the pod, once per episode.
	OverGrantAnnotate OverGrantAction = "annotate"
	// OverGrantEvict: also evict the pod through the Eviction API (PodDisruptionBudgets
	// apply; a refusal is retried at the next interval while the container stays over).
	OverGrantEvict OverGrantAction = "evict"
)

// ParseOverGrantAction reads --over-grant-action.
func ParseOverGrantAction(s string) (OverGrantAction, error) {
	switch a := OverGrantAction(s); a {
	case OverGrantNone, OverGrantAnnotate, OverGrantEvict:
		return a, nil
	}
	return "", fmt.Errorf("over-grant action %q: want %s, %s or %s", s, OverGrantNone, OverGrantAnnotate, OverGrantEvict)
}

// MaxOverGrantThreshold bounds --over-grant-threshold: above 10 (eleven times the grant)
// the watchdog would report nothing worth the name.
const MaxOverGrantThreshold = 10

// ParseMPSEscapeAction reads --mps-escape-action: the values of --over-grant-action.
func ParseMPSEscapeAction(s string) (OverGrantAction, error) {
	switch a := OverGrantAction(s); a {
	case OverGrantNone, OverGrantAnnotate, OverGrantEvict:
		return a, nil
	}
	return "", fmt.Errorf("MPS escape action %q: want %s, %s or %s", s, OverGrantNone, OverGrantAnnotate, OverGrantEvict)
}

// OverGrant configures the watchdog's judgement (Config.OverGrant): of containers above
// their grant, and of processes that bypass MPS, so that no MPS limit holds them, on a node
// labelled gpushare.io/isolation=mps.
type OverGrant struct {
	// Threshold is the fraction above the grant a container may use: over when used >
	// granted × (1 + Threshold). 0 ≤ Threshold ≤ MaxOverGrantThreshold.
	Threshold float64
	// Grace is how long a container must stay over before the event and the action; 0: at
	// the first sample over.
	Grace time.Duration
	// Action is what follows the event (default OverGrantNone).
	Action OverGrantAction
	// MPSEscape is what follows the GPUMPSEscape event about a pod's process that bypasses
	// MPS on a node labelled gpushare.io/isolation=mps, with the same meanings as Action but
	// the annotation gpushare.AnnotationMPSEscape (default, also when empty: OverGrantEvict).
	MPSEscape OverGrantAction
}

// Validate checks the threshold and grace, defaults Action to OverGrantNone and MPSEscape to
// OverGrantEvict. Errors: a threshold outside 0..MaxOverGrantThreshold, a negative grace, an
// unknown action.
func (o *OverGrant) Validate() error {
	switch {
	case math.IsNaN(o.Threshold) || o.Threshold < 0 || o.Threshold > MaxOverGrantThreshold:
		return fmt.Errorf("over-grant threshold %v: want a fraction 0..%d (0.05 is 5%% above the grant)", o.Threshold, MaxOverGrantThreshold)
	case o.Grace < 0:
		return fmt.Errorf("over-grant grace %v is negative", o.Grace)
	}
	if o.Action == "" {
		o.Action = OverGrantNone
	}
	if o.MPSEscape == "" {
		o.MPSEscape = OverGrantEvict
	}
	if _, err := ParseOverGrantAction(string(o.Action)); err != nil {
		return err
	}
	_, err := ParseMPSEscapeAction(string(o.MPSEscape))
	return err
}

// mpsEscapeAction is MPSEscape, OverGrantEvict when unset.
func (o OverGrant) mpsEscapeAction() OverGrantAction {
	if o.MPSEscape == "" {
		return OverGrantEvict
	}
	return o.MPSEscape
}

// Config is what New needs; every field is required but Utilization, ProcRoot and Unclaimed.
type Config struct {
	NodeName string
	// Cards are the node's cards, in index order.
	Cards []gpushare.Device
	// Unit is the size of one gpu-mem unit: a grant of n units is n × Unit.MiB MiB.
	Unit gpushare.Unit
	// Processes lists the processes on the card of an NVML index (gpunvml.Interface's).
	Processes func(index int) ([]gpunvml.Process, error)
	// Utilization reads the per-process utilisation of the card of an NVML index since its
	// previous call (gpunvml.Interface's ProcessUtilization); called once per card and
	// sample, off MPS nodes. Optional: nil exports no SM utilisation.
	Utilization func(index int) ([]gpunvml.ProcessUtilization, error)
	Client      kubernetes.Interface
	Recorder    record.EventRecorder
	Clock       clock.WithTicker
	// Interval is how often Run samples.
	Interval time.Duration
	// Resync is how often the node's usage annotation is written even when nothing moved.
	Resync time.Duration
	// OverGrant is the threshold, grace and actions (Validate'd by the caller). Whether the
	// node isolates its cards with MPS, which MPSEscape needs, the watchdog reads from the
	// node's gpushare.LabelIsolation itself, at most once per Resync.
	OverGrant OverGrant
	// Unclaimed is what is exempt from, and how often, the reports of pods using cards
	// they hold nothing on.
	Unclaimed Unclaimed
	// ProcRoot is where /proc/<pid>/cgroup is read (default /proc; the caller needs the
	// host's PID namespace).
	ProcRoot string
}

// Ledger tells the watchdog what the node's pods hold.
type Ledger interface {
	// Grants returns the pods of the node's pod view, each with its grant: the cards
	// each of its gpu-mem containers holds (zero when the pod holds none).
	Grants() []PodGrant
}

// PodGrant is one pod and its grant, the cards its containers hold (Grant: a gpushare
// allocation, whichever back end granted it).
type PodGrant struct {
	Pod   *corev1.Pod
	Grant gpushare.PodAllocation
}
