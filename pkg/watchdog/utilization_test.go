package watchdog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// smSeries are the SM utilisation series of the last scrape: "<metric> <pod>/<container>
// card <card>" to value.
func smSeries(t *testing.T, w *Watchdog) map[string]float64 {
	t.Helper()
	b, err := collect(w, "gpushare_container_gpu_sm_utilization_ratio", "gpushare_container_gpu_sm_utilization_per_share_ratio")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, l := range strings.Split(b, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, rest, _ := strings.Cut(l, "{")
		labels, value, _ := strings.Cut(rest, "} ")
		lv := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			lv[k] = strings.Trim(v, `"`)
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("series %q: %v", l, err)
		}
		short := strings.TrimSuffix(strings.TrimPrefix(name, "gpushare_container_gpu_sm_utilization_"), "_ratio")
		out[fmt.Sprintf("%s %s/%s card %s", short, lv["pod"], lv["container"], lv["card"])] = f
	}
	return out
}

// TestWatchdogUtilization: each container's processes' SM utilisation adds up per card,
// capped at the whole card, and is divided by its memory share (4 GiB units of a 15079 MiB
// T4) for the per-share figure; a container without samples is at 0; processes of no
// GPU-sharing pod are not charged; on an MPS node, on a card that does not report it, or
// when the read fails, no series is exported; a container without a grant on the card has
// no per-share figure.
func TestWatchdogUtilization(t *testing.T) {
	share := 4096.0 / 15079
	type util = gpunvml.ProcessUtilization
	tests := []struct {
		name      string
		label     string
		procs     []proc
		util      map[int][]util
		utilErr   map[int]error
		want      map[string]float64
		wantCalls int
	}{
		{
			name:  "time-slicing: two processes of one container, an idle container, a host process",
			procs: []proc{{0, 100, 1000, gpunvml.ProcessDirect}, {0, 101, 1000, gpunvml.ProcessDirect}, {0, 300, 10, gpunvml.ProcessDirect}, {1, 200, 10, gpunvml.ProcessDirect}},
			util:  map[int][]util{0: {{PID: 100, SMPercent: 30}, {PID: 101, SMPercent: 17}, {PID: 300, SMPercent: 53}}},
			want: map[string]float64{
				"ratio nb/main card 0": 0.47, "per_share nb/main card 0": 0.47 / share,
				"ratio ok/main card 1": 0, "per_share ok/main card 1": 0,
			},
			wantCalls: 2,
		},
		{
			name:  "capped at the whole card",
			procs: []proc{{0, 100, 1000, gpunvml.ProcessDirect}, {0, 101, 1000, gpunvml.ProcessDirect}},
			util:  map[int][]util{0: {{PID: 100, SMPercent: 70}, {PID: 101, SMPercent: 60}}},
			want: map[string]float64{
				"ratio nb/main card 0": 1, "per_share nb/main card 0": 1 / share,
				"ratio ok/main card 1": 0, "per_share ok/main card 1": 0,
			},
			wantCalls: 2,
		},
		{
			name:  "a card the container holds nothing on: no per-share figure",
			procs: []proc{{1, 100, 1000, gpunvml.ProcessDirect}},
			util:  map[int][]util{1: {{PID: 100, SMPercent: 25}}},
			want: map[string]float64{
				"ratio nb/main card 0": 0, "per_share nb/main card 0": 0,
				"ratio nb/main card 1": 0.25,
				"ratio ok/main card 1": 0, "per_share ok/main card 1": 0,
			},
			wantCalls: 2,
		},
		{
			name:  "limit node: as without isolation",
			label: "limit",
			procs: []proc{{0, 100, 1000, gpunvml.ProcessDirect}},
			util:  map[int][]util{0: {{PID: 100, SMPercent: 50}}},
			want: map[string]float64{
				"ratio nb/main card 0": 0.5, "per_share nb/main card 0": 0.5 / share,
				"ratio ok/main card 1": 0, "per_share ok/main card 1": 0,
			},
			wantCalls: 2,
		},
		{
			name:  "MPS node: NVML reports the server alone, so nothing is exported",
			label: "mps",
			procs: []proc{{0, 100, 1000, gpunvml.ProcessMPSClient}, {0, 300, 30, gpunvml.ProcessMPSServer}},
			util:  map[int][]util{0: {{PID: 300, SMPercent: 100}}},
			want:  map[string]float64{},
		},
		{
			name:      "a card without per-process utilisation, a failing card",
			procs:     []proc{{0, 100, 1000, gpunvml.ProcessDirect}},
			util:      map[int][]util{0: {{PID: 100, SMPercent: 50}}},
			utilErr:   map[int]error{0: fmt.Errorf("card 0: %w", gpunvml.ErrUtilizationUnsupported), 1: errors.New("NVML: unknown error")},
			want:      map[string]float64{},
			wantCalls: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newWatchdogEnv(t, OverGrant{Threshold: 10})
			e.proc(t, 101, podCgroup(podUIDs["nb"], ctrID(1)))
			if tc.label != "" {
				e.labelIsolation(t, tc.label)
			}
			e.listProcs(tc.procs...)
			e.mu.Lock()
			e.util, e.utilErr = tc.util, tc.utilErr
			e.mu.Unlock()
			e.at(0)
			if diff := cmp.Diff(tc.want, smSeries(t, e.w), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("SM utilisation series (-want,+got):\n%s", diff)
			}
			if e.utilCalls != tc.wantCalls {
				t.Errorf("%d utilisation reads, want %d (one per card, none on an MPS node)", e.utilCalls, tc.wantCalls)
			}
		})
	}
}

// TestWatchdogUtilizationGone: the series of a pod that is gone disappear with it.
func TestWatchdogUtilizationGone(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 10})
	e.listProcs(proc{0, 100, 1000, gpunvml.ProcessDirect}, proc{1, 200, 1000, gpunvml.ProcessDirect})
	e.util = map[int][]gpunvml.ProcessUtilization{0: {{PID: 100, SMPercent: 40}}, 1: {{PID: 200, SMPercent: 10}}}
	e.at(0)
	if got := smSeries(t, e.w); len(got) != 4 {
		t.Fatalf("series %v, want nb's and ok's two each", got)
	}
	e.ledger.remove("ok")
	e.at(15)
	for k := range smSeries(t, e.w) {
		if strings.Contains(k, "ok/") {
			t.Errorf("series %q of the deleted pod ok remains", k)
		}
	}
}
