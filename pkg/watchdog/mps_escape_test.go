package watchdog

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// proc is one process NVML lists: its card, PID, MiB used and kind.
type proc struct {
	card, pid, mib int
	kind           gpunvml.ProcessKind
}

// listProcs sets the cards' process listing to procs.
func (e *testEnv) listProcs(procs ...proc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs = map[int][]gpunvml.Process{}
	for _, p := range procs {
		e.procs[p.card] = append(e.procs[p.card], gpunvml.Process{PID: uint32(p.pid), UsedBytes: uint64(p.mib) << 20, UsedKnown: true, Kind: p.kind})
	}
}

// labelIsolation sets the test node's gpushare.io/isolation label ("" removes it).
func (e *testEnv) labelIsolation(t *testing.T, value string) {
	t.Helper()
	ctx := context.Background()
	node, err := e.client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[gpushare.LabelIsolation] = value
	if value == "" {
		delete(node.Labels, gpushare.LabelIsolation)
	}
	if _, err := e.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// evictions lists the pods the watchdog asked to evict, in order.
func (e *testEnv) evictions() []string {
	var out []string
	for _, a := range e.client.Actions() {
		if a.Matches("create", "pods") && a.GetSubresource() == "eviction" {
			if m, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
				out = append(out, m.GetName())
			}
		}
	}
	return out
}

// escapeSeries are the gpushare_mps_escapes_total series of the last scrape, "<labels> <value>".
func escapeSeries(t *testing.T, w *Watchdog) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(scrape(t, w), "\n") {
		if v, ok := strings.CutPrefix(l, "gpushare_mps_escapes_total"); ok {
			out = append(out, v)
		}
	}
	return out
}

// escapeLabels is a gpushare_mps_escapes_total series of testNode counted once.
func escapeLabels(card, namespace, reason string) string {
	return `{card="` + card + `",namespace="` + namespace + `",node="gpu-node",reason="` + reason + `"} 1`
}

// TestWatchdogMPSEscape: on a node labelled gpushare.io/isolation=mps, a process that is
// neither an MPS client nor the MPS server is an escape. A tenant pod's (nb's container
// main, pid 100; cpu, which requested no gpu-mem, pid 400) gets the GPUMPSEscape event, the
// counter and the action (evict by default); a host process (300), an unknown PID (999, not
// under the proc root) and a pod of an exempt namespace (the MPS daemon, 600) only the
// counter. The MPS server is fine on the host or in the daemon's pod, not in a tenant's.
func TestWatchdogMPSEscape(t *testing.T) {
	const direct, client, server = gpunvml.ProcessDirect, gpunvml.ProcessMPSClient, gpunvml.ProcessMPSServer
	tests := []struct {
		name       string
		label      string
		action     OverGrantAction
		procs      []proc
		wantEvents []string // substrings, one event each
		wantSeries []string
		wantEvicts []string
		wantAnn    string // nb's gpushare.io/mps-escape
	}{
		{name: "MPS client", label: "mps", procs: []proc{{0, 100, 3000, client}}},
		{name: "MPS server on the host and in the daemon's pod", label: "mps", procs: []proc{{0, 300, 30, server}, {1, 600, 30, server}}},
		{
			name:       "direct process of a pod",
			label:      "mps",
			procs:      []proc{{0, 100, 3000, direct}, {0, 200, 10, client}},
			wantEvents: []string{`Warning GPUMPSEscape Process 100 of container "main" holds a context of its own on card ` + uuid(0) + `, outside the card's MPS server (node labelled gpushare.io/isolation=mps): no MPS memory limit holds it, so it can allocate all the card's free memory; it uses 3000 MiB; share-plugin evicts the pod`},
			wantSeries: []string{escapeLabels("0", "default", "pod")},
			wantEvicts: []string{"nb"},
		},
		{
			name:       "direct process of a pod without gpu-mem",
			label:      "mps",
			procs:      []proc{{1, 400, 700, direct}},
			wantEvents: []string{`Process 400 of container "app"`},
			wantSeries: []string{escapeLabels("1", "default", "pod")},
			wantEvicts: []string{"cpu"},
		},
		{
			name:       "a tenant's process named as the server",
			label:      "mps",
			procs:      []proc{{0, 100, 3000, server}},
			wantEvents: []string{"bears the MPS server's name, nvidia-cuda-mps-server, but runs in this pod"},
			wantSeries: []string{escapeLabels("0", "default", "pod")},
			wantEvicts: []string{"nb"},
		},
		{name: "node not labelled mps", procs: []proc{{0, 100, 3000, direct}, {0, 300, 30, direct}}},
		{name: "node labelled limit", label: "limit", procs: []proc{{0, 100, 3000, direct}}},
		{name: "invalid label", label: "MPS", procs: []proc{{0, 100, 3000, direct}}},
		{name: "unknown PID", label: "mps", procs: []proc{{0, 999, 50, direct}}, wantSeries: []string{escapeLabels("0", "", "unknown")}},
		{name: "host process", label: "mps", procs: []proc{{1, 300, 50, direct}}, wantSeries: []string{escapeLabels("1", "", "host")}},
		{name: "exempt namespace", label: "mps", procs: []proc{{1, 600, 50, direct}}, wantSeries: []string{escapeLabels("1", "kube-system", "exempt")}},
		{name: "NVML cannot tell", label: "mps", procs: []proc{{0, 100, 3000, gpunvml.ProcessKindUnknown}}},
		{
			name:       "action none",
			label:      "mps",
			action:     OverGrantNone,
			procs:      []proc{{0, 100, 3000, direct}},
			wantEvents: []string{"it uses 3000 MiB\x00"},
			wantSeries: []string{escapeLabels("0", "default", "pod")},
		},
		{
			name:       "action annotate",
			label:      "mps",
			action:     OverGrantAnnotate,
			procs:      []proc{{0, 100, 3000, direct}},
			wantEvents: []string{"share-plugin records it in the pod annotation gpushare.io/mps-escape"},
			wantSeries: []string{escapeLabels("0", "default", "pod")},
			wantAnn:    `{"container":"main","card":"` + uuid(0) + `","pid":100,"since":"2026-01-01T00:00:00Z"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mps := gpuPod("mps", ctr{name: "daemon", id: ctrID(20)})
			mps.Namespace = "kube-system"
			e := newWatchdogEnv(t, OverGrant{Threshold: 10, MPSEscape: tc.action}, PodGrant{Pod: mps})
			e.proc(t, 600, podCgroup(podUIDs["mps"], ctrID(20)))
			if tc.label != "" {
				e.labelIsolation(t, tc.label)
			}
			e.listProcs(tc.procs...)
			e.at(0)
			ev := e.eventsWith(gpushare.EventGPUMPSEscape)
			if len(ev) != len(tc.wantEvents) {
				t.Fatalf("%d %s events %q, want %d", len(ev), gpushare.EventGPUMPSEscape, ev, len(tc.wantEvents))
			}
			for i, want := range tc.wantEvents {
				// A trailing NUL asks for the end of the message.
				if w, end := strings.CutSuffix(want, "\x00"); end && !strings.HasSuffix(ev[i], w) || !end && !strings.Contains(ev[i], want) {
					t.Errorf("event %q lacks %q", ev[i], want)
				}
			}
			if diff := cmp.Diff(tc.wantSeries, escapeSeries(t, e.w)); diff != "" {
				t.Errorf("gpushare_mps_escapes_total (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvicts, e.evictions()); diff != "" {
				t.Errorf("evictions (-want,+got):\n%s", diff)
			}
			if ann := e.podAnnotations(t, "nb")[gpushare.AnnotationMPSEscape]; ann != tc.wantAnn {
				t.Errorf("nb's %s = %q, want %q", gpushare.AnnotationMPSEscape, ann, tc.wantAnn)
			}
		})
	}
}

// TestWatchdogMPSEscapeEpisodes: an escape is reported once while it lasts, again when it
// comes back; an eviction a PodDisruptionBudget refuses is retried at the next sample; a
// terminating pod is left alone; a node relabelled mps is checked once Resync (10m) has
// passed since the watchdog last read it.
func TestWatchdogMPSEscapeEpisodes(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 10})
	refusals := 1
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		if refusals > 0 {
			refusals--
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return true, nil, nil
	})
	escaping := proc{0, 100, 3000, gpunvml.ProcessDirect}
	steps := []struct {
		sec        int
		label      string // set before the sample ("-": unchanged)
		procs      []proc
		wantEvents int
		wantEvicts int // eviction requests so far
		wantCount  string
	}{
		{0, "-", []proc{escaping}, 0, 0, ""},               // not labelled yet
		{15, "mps", []proc{escaping}, 0, 0, ""},            // relabelled; read again only after Resync
		{600, "-", []proc{escaping}, 1, 1, " 1"},           // read: an escape; eviction refused
		{615, "-", []proc{escaping}, 0, 2, " 1"},           // same escape: retried, evicted
		{630, "-", []proc{escaping}, 0, 2, " 1"},           // done
		{645, "-", nil, 0, 2, " 1"},                        // gone
		{660, "-", []proc{escaping}, 1, 3, " 2"},           // back: a new escape
		{675, "terminating", []proc{escaping}, 0, 3, " 2"}, // nb terminates
	}
	for _, s := range steps {
		switch s.label {
		case "-":
		case "terminating":
			now := metav1.NewTime(epoch)
			e.ledger.update("nb", func(pod *corev1.Pod) { pod.DeletionTimestamp = &now })
		default:
			e.labelIsolation(t, s.label)
		}
		e.listProcs(s.procs...)
		e.at(s.sec)
		if ev := e.eventsWith(gpushare.EventGPUMPSEscape); len(ev) != s.wantEvents {
			t.Errorf("t=%ds: %d events %q, want %d", s.sec, len(ev), ev, s.wantEvents)
		}
		if got := len(e.evictions()); got != s.wantEvicts {
			t.Errorf("t=%ds: %d eviction requests, want %d", s.sec, got, s.wantEvicts)
		}
		count := ""
		for _, l := range escapeSeries(t, e.w) {
			count = l[strings.LastIndex(l, " "):]
		}
		if count != s.wantCount {
			t.Errorf("t=%ds: counter %q, want %q", s.sec, count, s.wantCount)
		}
	}
}

// TestWatchdogMPSNodeReadFails: while the node cannot be read the watchdog does not take it
// for an MPS node, and reads it again at the next sample, not only after Resync.
func TestWatchdogMPSNodeReadFails(t *testing.T) {
	e := newWatchdogEnv(t, OverGrant{Threshold: 10})
	e.labelIsolation(t, "mps")
	// The first read and the first usage annotation write (whose answer is a read of the
	// node too) fail.
	failing := map[string]int{"get": 1, "patch": 1}
	e.client.PrependReactor("*", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failing[a.GetVerb()] > 0 {
			failing[a.GetVerb()]--
			return true, nil, apierrors.NewServiceUnavailable("the API server is away")
		}
		return false, nil, nil
	})
	e.listProcs(proc{0, 100, 3000, gpunvml.ProcessDirect})
	e.at(0)
	if ev := e.eventsWith(gpushare.EventGPUMPSEscape); len(ev) != 0 {
		t.Errorf("events %q while the node could not be read", ev)
	}
	e.at(15)
	if ev := e.eventsWith(gpushare.EventGPUMPSEscape); len(ev) != 1 {
		t.Errorf("%d events %q once the node was read, want 1", len(ev), ev)
	}
}

// TestWatchdogMPSServerMemory: on an MPS node the memory of the MPS servers (the daemons'
// overhead, outside every grant) is exported per card, a tenant's process bearing the
// server's name is not counted in it; off MPS nodes the series is absent.
func TestWatchdogMPSServerMemory(t *testing.T) {
	server := gpunvml.ProcessMPSServer
	for _, tc := range []struct {
		label string
		want  string
	}{
		{"mps", `gpushare_card_mps_server_memory_used_bytes{card="0",node="gpu-node",uuid="` + uuid(0) + `"} 3.145728e+08` + "\n" +
			`gpushare_card_mps_server_memory_used_bytes{card="1",node="gpu-node",uuid="` + uuid(1) + `"} 0`},
		{"", ""},
	} {
		t.Run("label "+tc.label, func(t *testing.T) {
			e := newWatchdogEnv(t, OverGrant{Threshold: 10})
			if tc.label != "" {
				e.labelIsolation(t, tc.label)
			}
			// Two servers of the host on card 0 (200 + 100 MiB); a tenant's process named as
			// the server is an escape, not overhead.
			e.listProcs(proc{0, 300, 200, server}, proc{0, 301, 100, server}, proc{0, 100, 50, server})
			e.at(0)
			got, err := collect(e.w, "gpushare_card_mps_server_memory_used_bytes")
			if err != nil {
				t.Fatal(err)
			}
			var series []string
			for _, l := range strings.Split(got, "\n") {
				if strings.HasPrefix(l, "gpushare_card_mps_server_memory_used_bytes{") {
					series = append(series, l)
				}
			}
			if d := cmp.Diff(tc.want, strings.Join(series, "\n")); d != "" {
				t.Errorf("series (-want,+got):\n%s", d)
			}
		})
	}
}
