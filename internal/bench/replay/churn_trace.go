package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"sort"
	"strings"
)

// cloneInfix marks buildWorkload's clones: "<name>-tuned-<i>".
const cloneInfix = "-tuned-"

// podTimes are one pod's trace times, seconds from the trace's origin.
type podTimes struct {
	Creation, Deletion int64
}

// ChurnTiming says how trace times become replay times: arrival gaps are divided by
// ArrivalFactor and run times (deletion − creation) by DurationFactor. Their ratio
// ArrivalFactor/DurationFactor multiplies the load the trace offers; their size only sets
// the replay's clock (an offline replay does not depend on it, a cluster replay does).
type ChurnTiming struct {
	ArrivalFactor  float64
	DurationFactor float64
}

// check wants both factors positive and finite.
func (t ChurnTiming) check() error {
	for _, f := range []float64{t.ArrivalFactor, t.DurationFactor} {
		if !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("churn timing: factors %g and %g: want positive numbers", t.ArrivalFactor, t.DurationFactor)
		}
	}
	return nil
}

// ChurnPod is one pod of a churn stream: it arrives at Arrive and, once placed, runs for
// Duration (replay seconds; +Inf: never leaves).
type ChurnPod struct {
	PodSpec
	Arrive, Duration float64
}

// readPodTimesFile reads the name, creation_time and deletion_time columns of a pod CSV
// (see parsePodTimes).
func readPodTimesFile(path string) (map[string]podTimes, []podTimes, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading pod times: %w", err)
	}
	defer f.Close()
	byName, rows, err := parsePodTimes(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return byName, rows, nil
}

// parsePodTimes returns each pod's times by name and in file order. Times are integer
// seconds, deletion_time not before creation_time. Errors name the line and column.
func parsePodTimes(r io.Reader) (map[string]podTimes, []podTimes, error) {
	t, err := newTable(r, []string{"name", "creation_time", "deletion_time"}, nil)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]podTimes{}
	var rows []podTimes
	for {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var pt podTimes
		if pt.Creation, err = row.nonNegative("creation_time", 1<<50); err != nil {
			return nil, nil, err
		}
		if pt.Deletion, err = row.nonNegative("deletion_time", 1<<50); err != nil {
			return nil, nil, err
		}
		if pt.Deletion < pt.Creation {
			return nil, nil, row.errorf("deletion_time", "%d before creation_time %d", pt.Deletion, pt.Creation)
		}
		byName[row.str("name")] = pt
		rows = append(rows, pt)
	}
	if len(rows) == 0 {
		return nil, nil, errors.New("pod times: no rows")
	}
	return byName, rows, nil
}

// buildChurnStream gives each pod its times and returns the pods in arrival order (pods'
// order on equal times), the first arriving at 0. A tuning clone takes its original's times. A pod absent from byName (the multigpu
// traces add pods the time source lacks) borrows the times of a row of rows drawn with
// math/rand seeded with seed; borrowed counts them. Errors: no pods, no rows to borrow
// from, bad timing.
func buildChurnStream(pods []PodSpec, byName map[string]podTimes, rows []podTimes, timing ChurnTiming, seed int64) (stream []ChurnPod, borrowed int, err error) {
	if err := timing.check(); err != nil {
		return nil, 0, err
	}
	if len(pods) == 0 || len(rows) == 0 {
		return nil, 0, errors.New("churn stream: no pods or no times")
	}
	rng := rand.New(rand.NewSource(seed))
	times := make([]podTimes, len(pods))
	origin := int64(math.MaxInt64)
	for i, p := range pods {
		pt, ok := byName[p.Name]
		if base, _, clone := strings.Cut(p.Name, cloneInfix); !ok && clone {
			pt, ok = byName[base] // a tuning clone (buildWorkload) runs when its original does
		}
		if !ok {
			pt = rows[rng.Intn(len(rows))]
			borrowed++
		}
		times[i] = pt
		origin = min(origin, pt.Creation)
	}
	stream = make([]ChurnPod, len(pods))
	for i, p := range pods {
		stream[i] = ChurnPod{
			PodSpec:  p,
			Arrive:   float64(times[i].Creation-origin) / timing.ArrivalFactor,
			Duration: float64(times[i].Deletion-times[i].Creation) / timing.DurationFactor,
		}
	}
	sort.SliceStable(stream, func(i, j int) bool { return stream[i].Arrive < stream[j].Arrive })
	return stream, borrowed, nil
}

// The default churn timing: arrival gaps / 3000 and run times × 10 (/ 0.1), 30 000 times
// the trace's load. With the default tuning (1.3) the cluster fills within the window
// and pods wait; the arrival window of an openb trace lasts about 16 minutes, a clock a
// cluster replay can follow (docs/design/benchmarks-replay.md).
const (
	ChurnArrivalFactor  = 3000
	ChurnDurationFactor = 0.1
)
