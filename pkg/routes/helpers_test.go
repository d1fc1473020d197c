package routes_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// fixture is a running cache plus the extender handler on a fake clientset whose Binding
// sets spec.nodeName and the Binding's annotations, as the API server does, and is refused
// (409) for a pod already bound or of another UID.
type fixture struct {
	*ct.Env
	h       *routes.Handlers
	metrics *metrics.Metrics
}

// counter reads the value of a counter vector's series with label value label, 0 when absent.
func (f *fixture) counter(t testing.TB, name, label string) float64 {
	t.Helper()
	families, err := f.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func newFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, 0, objs...)
}

func newFixtureWith(t testing.TB, maxBody int64, objs ...runtime.Object) *fixture {
	t.Helper()
	return build(t, ct.Start(t, time.Minute, objs...), "binpack", maxBody)
}

// newFGDFixture runs the fgd policy on a cache that tracks the workload, as the extender
// does for it.
func newFGDFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	return build(t, ct.StartTracking(t, objs...), "fgd", 0)
}

func build(t testing.TB, env *ct.Env, policyName string, maxBody int64) *fixture {
	t.Helper()
	return buildWith(t, env, policyName, func(c *routes.Config) { c.MaxRequestBytes = maxBody })
}

// newFixtureConfig is newFixture with the routes.Config changed by mod.
func newFixtureConfig(t testing.TB, mod func(*routes.Config), objs ...runtime.Object) *fixture {
	t.Helper()
	return buildWith(t, ct.Start(t, time.Minute, objs...), "binpack", mod)
}

func buildWith(t testing.TB, env *ct.Env, policyName string, mod func(*routes.Config)) *fixture {
	t.Helper()
	env.Client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		return true, b, applyBinding(env, b)
	})
	return handlerOn(t, env, policyName, mod)
}

// handlerOn is the extender's handler on env, without buildWith's Binding reactor: the fake
// clientset's reactors may only be added before its informers start listing.
func handlerOn(t testing.TB, env *ct.Env, policyName string, mod func(*routes.Config)) *fixture {
	t.Helper()
	pol, err := policy.New(policyName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := routes.Config{
		Cache: env.Cache, Policy: pol, Resources: gpushare.DefaultResources(), Client: env.Client,
		Metrics: metrics.New(env.Cache), Version: "test-version",
	}
	mod(&cfg)
	h, err := routes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{Env: env, h: h, metrics: cfg.Metrics}
}

// applyBinding does what the API server does for a Binding (cachetest.ApplyBinding).
func applyBinding(env *ct.Env, b *corev1.Binding) error { return ct.ApplyBinding(env.Client, b) }

// do sends a request with body (JSON-encoded unless it is []byte or nil) and returns the
// recorder.
func (f *fixture) do(t testing.TB, method, path string, body any) *httptest.ResponseRecorder {
	t.Helper()
	var buf []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		buf = b
	default:
		var err error
		if buf, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	f.handlerFor(path).ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader(buf)))
	return rec
}

// handlerFor routes path as the extender's two listeners split them: the scheduler verbs
// to Verbs, everything else to Diagnostics.
func (f *fixture) handlerFor(path string) http.Handler {
	switch path {
	case routes.Prefix + "/filter", routes.Prefix + "/prioritize", routes.Prefix + "/bind":
		return f.h.Verbs()
	}
	return f.h.Diagnostics()
}

// decodeInto decodes a JSON response, failing the test on error.
func decodeInto(t testing.TB, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("decoding response %q: %v", rec.Body.String(), err)
	}
}

// call posts the extender call verb ("filter", "prioritize") for pod on names and decodes
// the answer into out.
func (f *fixture) call(t testing.TB, verb string, pod *corev1.Pod, names []string, out any) {
	t.Helper()
	rec := f.do(t, http.MethodPost, "/gpushare-scheduler/"+verb, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
	if rec.Code != http.StatusOK {
		t.Fatalf("%s status %d: %s", verb, rec.Code, rec.Body)
	}
	decodeInto(t, rec, out)
}

// prioritize is call("prioritize").
func (f *fixture) prioritize(t testing.TB, pod *corev1.Pod, names []string) (got extenderv1.HostPriorityList) {
	t.Helper()
	f.call(t, "prioritize", pod, names, &got)
	return got
}

// filter is call("filter").
func (f *fixture) filter(t testing.TB, pod *corev1.Pod, names []string) (got extenderv1.ExtenderFilterResult) {
	t.Helper()
	f.call(t, "filter", pod, names, &got)
	return got
}
