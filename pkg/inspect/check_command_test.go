package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// proxyAnswer is an API-server proxy response for the fake clientset.
type proxyAnswer struct {
	body []byte
	err  error
}

func (p proxyAnswer) DoRaw(context.Context) ([]byte, error) { return p.body, p.err }
func (p proxyAnswer) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(p.body)), p.err
}

var _ restclient.ResponseWrapper = proxyAnswer{}

// serveJSON is an httptest server answering path with v as JSON (404 elsewhere).
func serveJSON(t *testing.T, path string, v any) *httptest.Server {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pluginPod is share-plugin's DaemonSet pod on node.
func pluginPod(node string) *corev1.Pod {
	p := makePod("kube-system", "share-plugin-"+node).Node(node).Obj()
	p.Labels = map[string]string{"app.kubernetes.io/name": "share-plugin"}
	return p
}

// draPluginPod is the DRA plugin's DaemonSet pod on node.
func draPluginPod(node string) *corev1.Pod {
	p := makePod("kube-system", "gpushare-dra-plugin-"+node).Node(node).Obj()
	p.Labels = map[string]string{"app.kubernetes.io/name": "gpushare-dra-plugin"}
	return p
}

// draCheckObjects is checkObjects and the DRA node gpu-dra: one T4 of 14 units, its plugin's
// pod, claims ml/nb-a..d of 4 units reserved by pods of those names (the running ones of
// running), and claim ml/ghost on a device no slice lists.
func draCheckObjects(running ...string) func(*testing.T) []runtime.Object {
	return func(t *testing.T) []runtime.Object {
		objs := append(checkObjects(t),
			makeNode("gpu-dra", "10.0.0.20").Label(gpushare.LabelBackend, string(gpushare.BackendDRA)).Obj(),
			draSlice("gpu-dra", 1, draDevice(0, "GPU-d", 14, gib, false)),
			draPluginPod("gpu-dra"))
		for _, c := range []string{"a", "b", "c", "d"} {
			objs = append(objs, draClaimObj("ml", "nb-"+c, []string{"nb-" + c}, draResult("gpu-dra", "gpu-0", 4*gib)))
		}
		for _, p := range running {
			objs = append(objs, makePod("ml", p).Node("gpu-dra").Obj())
		}
		return append(objs, draClaimObj("ml", "ghost", nil, draResult("gpu-dra", "gpu-9", gib)))
	}
}

// draPrepared is gpu-dra's plugin answer holding the claims ml/<names> of 4 units on card 0.
func draPrepared(names ...string) gpushare.DRAPreparedReport {
	r := gpushare.DRAPreparedReport{Node: "gpu-dra", Claims: []gpushare.DRAPreparedClaim{}}
	for _, n := range names {
		r.Claims = append(r.Claims, gpushare.DRAPreparedClaim{UID: k8stypes.UID(draClaimUID("ml", n)), Namespace: "ml", Name: n, Cards: gpushare.CardUnits{0: 4}})
	}
	return r
}

// checkObjects is gpu-a with agreeingPods, and share-plugin's pod on it.
func checkObjects(t *testing.T) []runtime.Object {
	n := checkNode(t)
	objs := []runtime.Object{&n, pluginPod("gpu-a")}
	for _, p := range agreeingPods() {
		objs = append(objs, &p)
	}
	return objs
}

// TestCheckCommand runs --check end to end: the annotations from a fake clientset, the
// extender and share-plugin from httptest servers (by URL) or the fake's proxy. Server
// addresses in the output are replaced by EXT, PLUGIN and DEAD.
func TestCheckCommand(t *testing.T) {
	drifted := agreeingExtender()
	drifted.Nodes[0].Cards[0].Used = 5 // 5 counted, pods 4
	withGhost := agreeingExtender()
	withGhost.Nodes = append(withGhost.Nodes, gpushare.InspectNode{Name: "gpu-z", Cards: []gpushare.InspectCard{{Index: 0, Used: 3, Pods: []gpushare.InspectPod{{Namespace: "ml", Name: "ghost", Units: 3}}}}})

	ext := serveJSON(t, gpushare.InspectPath, agreeingExtender())
	extDrifted := serveJSON(t, gpushare.InspectPath, drifted)
	extGhost := serveJSON(t, gpushare.InspectPath, withGhost)
	plugin := serveJSON(t, pluginServedPath, agreeingPlugin())
	unsynced := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cache not synced", http.StatusServiceUnavailable)
	}))
	t.Cleanup(unsynced.Close)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // its port now refuses connections

	// proxy answers the service and pod proxies as the API server would reach deploy/'s
	// extender service and share-plugin pod; anything else is an error.
	proxyWith := func(prepared gpushare.DRAPreparedReport) k8stesting.ProxyReactionFunc {
		return func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
			pa := a.(k8stesting.ProxyGetAction)
			var v any
			switch fmt.Sprintf("%s %s/%s:%s%s", pa.GetResource().Resource, pa.GetNamespace(), pa.GetName(), pa.GetPort(), pa.GetPath()) {
			case "services kube-system/gpushare-extender:diagnostics/gpushare-scheduler/inspect":
				v = agreeingExtender()
			case "pods kube-system/share-plugin-gpu-a:9401/served":
				v = agreeingPlugin()
			case "pods kube-system/gpushare-dra-plugin-gpu-dra:9401/prepared":
				v = prepared
			default:
				return true, proxyAnswer{err: errors.New("no such proxy target")}, nil
			}
			b, _ := json.Marshal(v)
			return true, proxyAnswer{body: b}, nil
		}
	}
	proxy := proxyWith(draPrepared("nb-a", "nb-b", "nb-c", "nb-d"))

	tests := []struct {
		name     string
		objs     func(*testing.T) []runtime.Object
		proxy    k8stesting.ProxyReactionFunc
		react    k8stesting.ReactionFunc
		args     []string
		want     string // stdout
		wantErr  string
		wantCode int
	}{
		{
			name: "all agree by URL",
			args: []string{"--check", "--extender-url", ext.URL, "--share-plugin-urls", plugin.URL},
			want: "ok: 1 nodes, 2 cards, 2 pods agree\n",
		},
		{
			name: "all agree through the API server's proxies",
			args: []string{"--check"}, proxy: proxy,
			want: "ok: 1 nodes, 2 cards, 2 pods agree\n",
		},
		{
			name:     "extender disagrees: exit 1",
			args:     []string{"--check", "--extender-url", extDrifted.URL, "--share-plugin-urls", plugin.URL},
			want:     "node gpu-a card 0: extender counts 5 units, annotations 4 (its pods agree; its used total does not)\n",
			wantErr:  "check found 1 disagreement(s)",
			wantCode: 1,
		},
		{
			name: "disagreement as JSON",
			args: []string{"--check", "--extender-url", extDrifted.URL, "--share-plugin-urls", plugin.URL, "-o", "json"},
			want: `{
  "ok": false,
  "nodes": 1,
  "cards": 2,
  "pods": 2,
  "problems": [
    {
      "kind": "extender-differs",
      "node": "gpu-a",
      "card": 0,
      "line": "node gpu-a card 0: extender counts 5 units, annotations 4 (its pods agree; its used total does not)"
    }
  ],
  "notes": [],
  "notChecked": []
}
`,
			wantErr:  "check found 1 disagreement(s)",
			wantCode: 1,
		},
		{
			name:     "extender URL given but refused: exit 2",
			args:     []string{"--check", "--extender-url", dead.URL, "--share-plugin-urls", plugin.URL},
			want:     `extender: not checked (Get "DEAD/gpushare-scheduler/inspect": dial tcp DEAD_ADDR: connect: connection refused)` + "\n",
			wantErr:  "check incomplete: a component given by URL could not be read (0 disagreement(s) among what was read)",
			wantCode: 2,
		},
		{
			name:     "extender URL answers 503: exit 2",
			args:     []string{"--check", "--extender-url", unsynced.URL, "--share-plugin-urls", plugin.URL},
			want:     "extender: not checked (GET UNSYNCED/gpushare-scheduler/inspect: 503 Service Unavailable: cache not synced)\n",
			wantErr:  "check incomplete: a component given by URL could not be read (0 disagreement(s) among what was read)",
			wantCode: 2,
		},
		{
			name:     "share-plugin URL given but refused: exit 2",
			args:     []string{"--check", "--extender-url", ext.URL, "--share-plugin-urls", dead.URL},
			want:     `share-plugin at DEAD: not checked (Get "DEAD/served": dial tcp DEAD_ADDR: connect: connection refused)` + "\nshare-plugin on node gpu-a: not checked (no share-plugin answered for this node)\n",
			wantErr:  "check incomplete: a component given by URL could not be read (0 disagreement(s) among what was read)",
			wantCode: 2,
		},
		{
			name: "proxies unreachable: reported, not a failure",
			args: []string{"--check"},
			want: "extender: not checked (through service kube-system/gpushare-extender: the API server's proxy gave no response)\n" +
				"share-plugin on node gpu-a (pod kube-system/share-plugin-gpu-a): not checked (the API server's proxy gave no response)\n" +
				"ok: 1 nodes, 2 cards, 2 pods agree\n",
		},
		{
			name: "no share-plugin pod",
			objs: func(t *testing.T) []runtime.Object { return checkObjects(t)[:1] },
			args: []string{"--check", "--extender-url", ext.URL},
			want: "node gpu-a card 0: extender counts 4 units, annotations 0 (ml/a: extender 4, annotations not bound here)\n" +
				"node gpu-a card 1: extender counts 6 units, annotations 0 (ml/b: extender 6, annotations not bound here)\n" +
				"share-plugin: not checked (no running pod labelled app.kubernetes.io/name=share-plugin in kube-system)\n",
			wantErr:  "check found 2 disagreement(s)",
			wantCode: 1,
		},
		{
			name:  "DRA node: claims past a card's capacity",
			objs:  draCheckObjects(),
			args:  []string{"--check", "--extender-url", ext.URL},
			proxy: proxy,
			want: "node gpu-dra: claim ml/ghost holds device gpu-9, which the node's ResourceSlices do not list\n" +
				"node gpu-dra card 0: claims consume 16 units, ResourceSlice capacity 14 (ml/nb-a 4, ml/nb-b 4, ml/nb-c 4, ml/nb-d 4)\n",
			wantErr:  "check found 2 disagreement(s)",
			wantCode: 1,
		},
		{
			name:  "DRA node: the plugin's prepared claims differ from the allocated ones",
			objs:  draCheckObjects("nb-d"),
			args:  []string{"--check", "--extender-url", ext.URL},
			proxy: proxyWith(draPrepared("nb-a", "nb-b", "nb-c", "nb-old")),
			want: "node gpu-dra: claim ml/ghost holds device gpu-9, which the node's ResourceSlices do not list\n" +
				"node gpu-dra card 0: claims consume 16 units, ResourceSlice capacity 14 (ml/nb-a 4, ml/nb-b 4, ml/nb-c 4, ml/nb-d 4)\n" +
				"node gpu-dra: claim ml/nb-d is allocated here and its pod nb-d runs, but the DRA plugin has not prepared it\n" +
				"node gpu-dra: the DRA plugin holds claim ml/nb-old (uid uid-ml-nb-old) prepared with {0:4}, but no claim of that UID is allocated on the node\n",
			wantErr:  "check found 4 disagreement(s)",
			wantCode: 1,
		},
		{
			name: "DRA node: its plugin not running is not checked",
			objs: func(t *testing.T) []runtime.Object {
				var out []runtime.Object
				for _, o := range draCheckObjects("nb-d")(t) {
					if p, ok := o.(*corev1.Pod); !ok || p.Name != "gpushare-dra-plugin-gpu-dra" {
						out = append(out, o)
					}
				}
				return out
			},
			args:  []string{"--check", "--extender-url", ext.URL},
			proxy: proxy,
			want: "node gpu-dra: claim ml/ghost holds device gpu-9, which the node's ResourceSlices do not list\n" +
				"node gpu-dra card 0: claims consume 16 units, ResourceSlice capacity 14 (ml/nb-a 4, ml/nb-b 4, ml/nb-c 4, ml/nb-d 4)\n" +
				"gpushare-dra-plugin: not checked (no running pod labelled app.kubernetes.io/name=gpushare-dra-plugin in kube-system)\n",
			wantErr:  "check found 2 disagreement(s)",
			wantCode: 1,
		},
		{
			name: "NODE leaves the extender's other nodes out",
			args: []string{"gpu-a", "--check", "--extender-url", extGhost.URL, "--share-plugin-urls", plugin.URL},
			want: "ok: 1 nodes, 2 cards, 2 pods agree\n",
		},
		{
			name:     "all nodes include the extender's other node",
			args:     []string{"--check", "--extender-url", extGhost.URL, "--share-plugin-urls", plugin.URL},
			want:     "node gpu-z card 0: extender counts 3 units, annotations 0 (ml/ghost: extender 3, annotations not bound here)\n",
			wantErr:  "check found 1 disagreement(s)",
			wantCode: 1,
		},
		{
			name: "API server unreachable: exit 2",
			args: []string{"--check", "--extender-url", ext.URL},
			react: func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("connection refused")
			},
			wantErr:  "listing nodes: connection refused",
			wantCode: 2,
		},
		{
			name:     "with -d: exit 2",
			args:     []string{"--check", "-d"},
			wantErr:  "--check compares the views of occupancy: it takes neither --pending nor -d",
			wantCode: 2,
		},
		{
			name:     "extender URL without scheme: exit 2",
			args:     []string{"--check", "--extender-url", "127.0.0.1:12345"},
			wantErr:  `"127.0.0.1:12345" is not an http(s) URL with a host (e.g. http://127.0.0.1:12345)`,
			wantCode: 2,
		},
		{
			name:     "unknown flag with --check: exit 2",
			args:     []string{"--check", "--bogus"},
			wantErr:  "unknown flag: --bogus",
			wantCode: 2,
		},
		{
			name:     "without --check errors stay exit 1",
			args:     []string{"-o", "xml"},
			wantErr:  `--output "xml": want json or yaml`,
			wantCode: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := checkObjects
			if tc.objs != nil {
				objs = tc.objs
			}
			cs := fake.NewClientset(objs(t)...)
			if tc.proxy != nil {
				cs.PrependProxyReactor("*", tc.proxy)
			}
			r := runOn(t, cs, "", tc.react, tc.args...)
			out := strings.NewReplacer(
				ext.URL, "EXT", plugin.URL, "PLUGIN", unsynced.URL, "UNSYNCED",
				dead.URL, "DEAD", strings.TrimPrefix(dead.URL, "http://"), "DEAD_ADDR",
			).Replace(r.stdout)
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("stdout (-want,+got):\n%s", diff)
			}
			gotErr := ""
			if r.err != nil {
				gotErr = r.err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error = %q, want %q", gotErr, tc.wantErr)
			}
			if got := ExitCode(r.err); got != tc.wantCode {
				t.Errorf("exit code %d, want %d", got, tc.wantCode)
			}
		})
	}
}
