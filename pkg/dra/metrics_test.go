package dra

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestPrepareReason: each way a claim fails, run through the driver, counts under its own
// reason and under no other.
func TestPrepareReason(t *testing.T) {
	const uid = "eeeeeeee-0000-4000-8000-000000000001"
	iso := func(i gpushare.Isolation, err error) func(context.Context) (gpushare.Isolation, error) {
		return func(context.Context) (gpushare.Isolation, error) { return i, err }
	}
	tests := []struct {
		reason string
		claim  *resourceapi.ResourceClaim
		setup  func(t *testing.T, cfg *DriverConfig) // before New
		after  func(t *testing.T, cfg DriverConfig)  // after New
	}{
		{reason: reasonNotAllocated, claim: claim(uid, "pending")},
		{reason: reasonNotAllocated, claim: claim(uid, "nic", func() resourceapi.DeviceRequestAllocationResult {
			r := result("nic", "gpu-0", "")
			r.Driver = "gpu.nvidia.com"
			return r
		}())},
		{reason: reasonUnknownDevice, claim: claim(uid, "ghost", result("gpu", "gpu-7", "1Gi"))},
		{reason: reasonInvalidCapacity, claim: claim(uid, "half", result("gpu", "gpu-0", "1536Mi"))},
		{reason: reasonOverCard, claim: claim(uid, "big", result("gpu", "gpu-0", "15Gi"))},
		{reason: reasonUnhealthy, claim: claim(uid, "sick", result("gpu", "gpu-1", "1Gi")),
			setup: func(_ *testing.T, cfg *DriverConfig) { cfg.Healthy = func(u string) bool { return u != "GPU-bbbb" } }},
		{reason: reasonIsolation, claim: claim(uid, "mps", result("gpu", "gpu-0", "1Gi")),
			setup: func(_ *testing.T, cfg *DriverConfig) { cfg.Isolation = iso(gpushare.IsolationMPS, nil) }},
		{reason: reasonIsolation, claim: claim(uid, "unenforced", result("gpu", "gpu-0", "1Gi")),
			setup: func(_ *testing.T, cfg *DriverConfig) {
				cfg.Isolation, cfg.LimitUnsupported = iso(gpushare.IsolationLimit, nil), errors.New("driver too old")
			}},
		{reason: reasonIsolation, claim: claim(uid, "unread", result("gpu", "gpu-0", "1Gi")),
			setup: func(_ *testing.T, cfg *DriverConfig) { cfg.Isolation = iso("", errors.New("API down")) }},
		{reason: reasonCDISpec, claim: claim(uid, "nospec", result("gpu", "gpu-0", "1Gi")),
			after: func(t *testing.T, cfg DriverConfig) { blockDir(t, cfg.Specs.Dir) }},
		{reason: reasonCheckpoint, claim: claim(uid, "nocheckpoint", result("gpu", "gpu-0", "1Gi")),
			after: func(t *testing.T, cfg DriverConfig) { blockDir(t, cfg.DataDir) }},
	}
	for _, tt := range tests {
		t.Run(tt.reason+"/"+tt.claim.Name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			if tt.setup != nil {
				tt.setup(t, &cfg)
			}
			d := newTestDriver(t, cfg)
			if tt.after != nil {
				tt.after(t, cfg)
			}
			m := newMetrics()
			res, err := observed{Driver: d, m: m}.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{tt.claim})
			if err != nil || res[tt.claim.UID].Err == nil {
				t.Fatalf("prepare: %v, claim result %+v; want the claim to fail", err, res[tt.claim.UID])
			}
			for _, r := range prepareReasons {
				want := 0.0
				if r == tt.reason {
					want = 1
				}
				if got := testutil.ToFloat64(m.prepareFailed.WithLabelValues(r)); got != want {
					t.Errorf("failures{reason=%q} = %v, want %v (error: %v)", r, got, want, res[tt.claim.UID].Err)
				}
			}
			if got := testutil.ToFloat64(m.prepared); got != 0 {
				t.Errorf("prepared = %v, want 0", got)
			}
		})
	}
}

// blockDir puts a file where the folder dir would be created.
func blockDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestObservedCounts: prepared and unprepared claims count, a claim unprepared twice too.
func TestObservedCounts(t *testing.T) {
	d := newTestDriver(t, testConfig(t.TempDir()))
	m := newMetrics()
	o := observed{Driver: d, m: m}
	ctx := context.Background()
	a := claim("aaaaaaaa-0000-4000-8000-000000000001", "a", result("gpu", "gpu-0", "4Gi"))
	b := claim("aaaaaaaa-0000-4000-8000-000000000002", "b", result("gpu", "gpu-0", "12Gi"))
	if _, err := o.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{a, b}); err != nil {
		t.Fatal(err)
	}
	gone := []kubeletplugin.NamespacedObject{{UID: a.UID}, {UID: a.UID}}
	if _, err := o.UnprepareResourceClaims(ctx, gone[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := o.UnprepareResourceClaims(ctx, gone[1:]); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ got, want float64 }{
		"prepared":             {testutil.ToFloat64(m.prepared), 1},
		"over_free failures":   {testutil.ToFloat64(m.prepareFailed.WithLabelValues(reasonOverFree)), 1},
		"unprepared":           {testutil.ToFloat64(m.unprepared), 2},
		"unprepare cdi_spec":   {testutil.ToFloat64(m.unprepareFailed.WithLabelValues(reasonCDISpec)), 0},
		"unprepare checkpoint": {testutil.ToFloat64(m.unprepareFailed.WithLabelValues(reasonCheckpoint)), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
}

// TestProbes: /healthz and /readyz in each state of the plugin.
func TestProbes(t *testing.T) {
	tests := []struct {
		name                    string
		registered, published   bool
		stopped, noHealthyCards bool
		healthz, readyz         int
		body                    string // in /healthz's answer
	}{
		{name: "starting", healthz: 503, readyz: 503, body: "not registered with kubelet"},
		{name: "registered, no slice yet", registered: true, healthz: 503, readyz: 503, body: "ResourceSlice is not published"},
		{name: "serving", registered: true, published: true, healthz: 200, readyz: 200, body: "ok"},
		{name: "every card unhealthy", registered: true, published: true, noHealthyCards: true, healthz: 200, readyz: 503, body: "ok"},
		{name: "server stopped", registered: true, published: true, stopped: true, healthz: 503, readyz: 503, body: "the kubelet plugin server stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			if tt.noHealthyCards {
				cfg.Healthy = func(string) bool { return false }
			}
			p := &probes{registration: func() bool { return tt.registered }}
			p.published.Store(tt.published)
			p.stopped.Store(tt.stopped)
			srv := httptest.NewServer(newTestDriver(t, cfg).handler(p, newMetrics()))
			defer srv.Close()
			code, body := get(t, srv.URL+"/healthz")
			if code != tt.healthz || !strings.Contains(body, tt.body) {
				t.Errorf("/healthz = %d %q, want %d with %q", code, body, tt.healthz, tt.body)
			}
			if code, body := get(t, srv.URL+"/readyz"); code != tt.readyz {
				t.Errorf("/readyz = %d %q, want %d", code, body, tt.readyz)
			}
		})
	}
}

// TestMetricsCards: the per-card gauges count the prepared claims and their memory, in
// bytes, and the plugin's state.
func TestMetricsCards(t *testing.T) {
	d := newTestDriver(t, testConfig(t.TempDir(), "GPU-bbbb"))
	ctx := context.Background()
	claims := []*resourceapi.ResourceClaim{
		claim("bbbbbbbb-0000-4000-8000-000000000001", "a", result("gpu", "gpu-0", "4Gi")),
		claim("bbbbbbbb-0000-4000-8000-000000000002", "b", result("gpu", "gpu-0", "2Gi")),
	}
	if res, err := d.PrepareResourceClaims(ctx, claims); err != nil || res[claims[0].UID].Err != nil || res[claims[1].UID].Err != nil {
		t.Fatalf("prepare: %v %+v", err, res)
	}
	p := &probes{registration: func() bool { return true }}
	p.published.Store(true)
	failures := t.TempDir()
	if _, err := limithook.WriteFailure(failures, limithook.FailureRecord{Reason: limithook.ReasonUnsupported, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	m.limitHook = nodecards.NewLimitHookFailures(failures, "node-a") // as Run does with Config.LimitHookFailureDir
	srv := httptest.NewServer(d.handler(p, m))
	defer srv.Close()
	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	card0 := `{index="0",model="Tesla T4",node="node-a",uuid="GPU-aaaa"}`
	card1 := `{index="1",model="Tesla T4",node="node-a",uuid="GPU-bbbb"}`
	for _, want := range []string{
		"gpushare_card_units" + card0 + " 14",
		"gpushare_card_healthy" + card0 + " 1",
		"gpushare_card_healthy" + card1 + " 0",
		"gpushare_dra_card_prepared_claims" + card0 + " 2",
		"gpushare_dra_card_prepared_claims" + card1 + " 0",
		"gpushare_dra_card_prepared_memory_bytes" + card0 + " 6.442450944e+09",
		"gpushare_dra_card_prepared_memory_bytes" + card1 + " 0",
		`gpushare_dra_plugin_registered{node="node-a"} 1`,
		`gpushare_dra_slice_published{node="node-a"} 1`,
		`gpushare_dra_claim_prepare_failures_total{reason="unhealthy"} 0`,
		`gpushare_dra_claim_unprepare_failures_total{reason="checkpoint"} 0`,
		"gpushare_dra_claims_prepared_total 0",
		"gpushare_dra_claims_unprepared_total 0",
		`gpushare_limit_hook_failures_total{node="node-a",reason="unsupported"} 1`,
		`gpushare_limit_hook_failures_total{node="node-a",reason="deadline"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
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
	return resp.StatusCode, string(b)
}
