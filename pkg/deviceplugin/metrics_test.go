package deviceplugin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
)

func TestMetricsAndProbes(t *testing.T) {
	// Card 0 holds 4 (a) + 2 (b's first container); card 1 holds b's second container's 3.
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, []ctr{{name: "m", units: 4}}, app(gpushare.CardUnits{0: 4})),
		makePod("b", 2, 11, []ctr{{name: "x", units: 2}, {name: "y", units: 3}}, app(gpushare.CardUnits{0: 2}, gpushare.CardUnits{1: 3})),
	)
	srv := httptest.NewServer(e.plugin.Handler())
	defer srv.Close()

	body := get(t, srv.URL+"/metrics", http.StatusOK)
	for _, want := range []string{
		`gpushare_card_allocated_units{index="0",model="Tesla T4",node="gpu-node",uuid="` + uuid(0) + `"} 6`,
		`gpushare_card_allocated_units{index="1",model="Tesla T4",node="gpu-node",uuid="` + uuid(1) + `"} 3`,
		`gpushare_card_units{index="1",model="Tesla T4",node="gpu-node",uuid="` + uuid(1) + `"} 14`,
		`gpushare_card_healthy{index="0",model="Tesla T4",node="gpu-node",uuid="` + uuid(0) + `"} 1`,
		`gpushare_plugin_registered{node="gpu-node"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "gpushare_card_memory_used_mib") {
		t.Error("/metrics reports NVML used memory for a simulated node")
	}
	get(t, srv.URL+"/healthz", http.StatusServiceUnavailable)
	get(t, srv.URL+"/readyz", http.StatusServiceUnavailable)
	e.plugin.setRegistered(true)
	get(t, srv.URL+"/healthz", http.StatusOK)
	// Registered, but kubelet has read no device list: it would refuse gpu-mem pods.
	get(t, srv.URL+"/readyz", http.StatusServiceUnavailable)
	e.plugin.streams.Add(1)
	get(t, srv.URL+"/readyz", http.StatusOK)
	e.plugin.setRegistered(false)
	get(t, srv.URL+"/readyz", http.StatusServiceUnavailable)
}

func get(t *testing.T, url string, wantCode int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != wantCode {
		t.Errorf("GET %s = %d, want %d", url, resp.StatusCode, wantCode)
	}
	return string(b)
}

// The streams gauge is what tells a restarted plugin's kubelet can admit pods: it counts a
// ListAndWatch stream once its device list is sent, and no longer once the stream ends.
func TestListAndWatchStreamsGauge(t *testing.T) {
	e := newTestEnv(t, "t4")
	runPlugin(t, e)
	srv := httptest.NewServer(e.plugin.Handler())
	defer srv.Close()
	want := func(n string) func() bool {
		return func() bool {
			return strings.Contains(get(t, srv.URL+"/metrics", http.StatusOK), `gpushare_plugin_list_and_watch_streams{node="gpu-node"} `+n)
		}
	}
	if !want("0")() {
		t.Fatal("/metrics counts a stream before kubelet opened one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := dialPlugin(t, e.dir).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("ListAndWatch: %v", err)
	}
	waitFor(t, "the stream to be counted", want("1"))
	cancel()
	waitFor(t, "the ended stream to be uncounted", want("0"))
}

// With a limit hook failure folder, /metrics counts the hook's failure records.
func TestMetricsCountLimitHookFailures(t *testing.T) {
	e := newTestEnv(t, "t4:1")
	dir := t.TempDir()
	e.plugin.cfg.LimitHookFailureDir = dir
	if _, err := limithook.WriteFailure(dir, limithook.FailureRecord{Reason: limithook.ReasonDeadline, Card: uuid(0), Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.plugin.Handler())
	defer srv.Close()
	for range 2 { // counted once
		body := get(t, srv.URL+"/metrics", http.StatusOK)
		for _, want := range []string{
			`gpushare_limit_hook_failures_total{node="gpu-node",reason="deadline"} 1` + "\n",
			`gpushare_limit_hook_failures_total{node="gpu-node",reason="nvml"} 0` + "\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
}
