package watchdog

import (
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

func (e *testEnv) unclaimedEvents() []string { return e.eventsWith(gpushare.EventGPUMemoryUnclaimed) }

// unclaimedSeries is the gpushare_pod_unclaimed_gpu_memory_used_bytes series of pod on card
// (of testNode, namespace default) with its value.
func unclaimedSeries(pod string, card int, value string) string {
	return `gpushare_pod_unclaimed_gpu_memory_used_bytes{card="` + string(rune('0'+card)) + `",namespace="default",node="gpu-node",pod="` +
		pod + `",uuid="` + uuid(card) + `"} ` + value
}

// TestWatchdogUnclaimed: processes of a pod on a card the pod holds nothing on are charged
// to the pod (event, gauge), whichever cgroup driver named the pod: cpu requested no
// gpu-mem, nb holds card 0 only. nb on its own card, the host process and a pod of an
// exempt namespace (an MPS daemon) are not reported; a process NVML cannot measure still is
// (its presence is the finding).
func TestWatchdogUnclaimed(t *testing.T) {
	mps := gpuPod("mps", ctr{name: "daemon", id: ctrID(20)})
	mps.Namespace = "kube-system"
	tests := []struct {
		name       string
		use        [][3]int // card, pid, MiB
		unknown    []int    // pids listed on card 0 without a measured use
		wantEvents []string // substrings, one event each
		wantSeries []string
		noSeries   []string // pod names without a series
	}{
		{
			name:       "pod without gpu-mem",
			use:        [][3]int{{0, 400, 700}},
			wantEvents: []string{"use 700 MiB of GPU memory on card " + uuid(0)},
			wantSeries: []string{unclaimedSeries("cpu", 0, "7.340032e+08")},
		},
		{
			name:       "cgroupfs driver's path",
			use:        [][3]int{{1, 401, 64}},
			wantEvents: []string{"use 64 MiB of GPU memory on card " + uuid(1)},
			wantSeries: []string{unclaimedSeries("cpu", 1, "6.7108864e+07")},
		},
		{
			name:       "pod on a card it holds nothing on",
			use:        [][3]int{{0, 100, 1000}, {1, 100, 10}},
			wantEvents: []string{"use 10 MiB of GPU memory on card " + uuid(1)},
			wantSeries: []string{unclaimedSeries("nb", 1, "1.048576e+07")},
			noSeries:   []string{`card="0",namespace="default",node="gpu-node",pod="nb"`},
		},
		{
			name:     "own card, host and exempt namespace",
			use:      [][3]int{{0, 100, 1000}, {0, 300, 500}, {1, 600, 300}},
			noSeries: []string{"nb", "mps"},
		},
		{
			name:       "use NVML cannot measure",
			unknown:    []int{400},
			wantEvents: []string{"at least 0 MiB"},
			wantSeries: []string{unclaimedSeries("cpu", 0, "0")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newWatchdogEnv(t, OverGrant{Threshold: 0.05}, PodGrant{Pod: mps})
			e.proc(t, 600, podCgroup(podUIDs["mps"], ctrID(20)))
			e.proc(t, 401, "0::/kubepods/besteffort/pod"+podUIDs["cpu"]+"/"+ctrID(4)+"\n")
			e.use(tc.use...)
			for _, pid := range tc.unknown {
				e.list(0, gpunvml.Process{PID: uint32(pid)})
			}
			e.at(0)
			ev := e.unclaimedEvents()
			if len(ev) != len(tc.wantEvents) {
				t.Fatalf("%d %s events %q, want %d", len(ev), gpushare.EventGPUMemoryUnclaimed, ev, len(tc.wantEvents))
			}
			for i, want := range tc.wantEvents {
				if !strings.Contains(ev[i], "Warning "+gpushare.EventGPUMemoryUnclaimed) || !strings.Contains(ev[i], want) {
					t.Errorf("event %q, want a Warning %s with %q", ev[i], gpushare.EventGPUMemoryUnclaimed, want)
				}
			}
			body := scrape(t, e.w)
			for _, want := range tc.wantSeries {
				if !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %q:\n%s", want, body)
				}
			}
			for _, pod := range tc.noSeries {
				for _, l := range strings.Split(body, "\n") {
					if strings.HasPrefix(l, "gpushare_pod_unclaimed_gpu_memory_used_bytes{") && strings.Contains(l, pod) {
						t.Errorf("/metrics has %q", l)
					}
				}
			}
		})
	}
}

// TestWatchdogUnclaimedRepeat: one event when the use starts, none while it goes on or
// comes back within DefaultUnclaimedRepeat, another after it; the series goes with the use
// and with the pod, and a pod that is gone is forgotten.
func TestWatchdogUnclaimedRepeat(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 0.05})
	steps := []struct {
		sec        int
		mib        int // cpu's use of card 0; 0: no process
		wantEvents int
	}{
		{0, 700, 1},
		{15, 800, 0},
		{30, 0, 0},
		{45, 700, 0}, // back within the hour
		{3600, 700, 1},
		{3615, 700, 0},
	}
	for _, s := range steps {
		if s.mib > 0 {
			e.use([3]int{0, 400, s.mib})
		} else {
			e.use()
		}
		e.at(s.sec)
		if ev := e.unclaimedEvents(); len(ev) != s.wantEvents {
			t.Fatalf("t=%ds: %d events %q, want %d", s.sec, len(ev), ev, s.wantEvents)
		}
		has := strings.Contains(scrape(t, e.w), `pod="cpu"`)
		if has != (s.mib > 0) {
			t.Errorf("t=%ds: series of cpu present %v, want %v", s.sec, has, s.mib > 0)
		}
	}
	e.ledger.remove("cpu")
	e.at(3630)
	if strings.Contains(scrape(t, e.w), `pod="cpu"`) {
		t.Error("series of the deleted pod cpu still exported")
	}
	if len(e.w.unclaimedReported) != 0 {
		t.Errorf("reports of a deleted pod remembered: %v", e.w.unclaimedReported)
	}
}
