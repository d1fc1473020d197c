//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// CaseBindChecksRequest: a caller with a valid client certificate still cannot bind a pod of
// another scheduler, a pod without its UID, or a pod to a node the extender does not serve.
// Each answer says why, and the pod stays unbound.
func CaseBindChecksRequest(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	ctx := testContext(t, 2*time.Minute)
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "bindcheck", t4)
	other := gpuPod(ns, "other", node, ctr{units: 2})
	other.Spec.SchedulerName = "other-scheduler" // no such scheduler runs: nothing else binds it
	createPod(t, e, other)
	mine := gpuPod(ns, "mine", node, ctr{units: 2}) // the default scheduler's, placed nowhere
	mine.Spec.NodeSelector = map[string]string{"e2e.gpushare.io/nowhere": "true"}
	createPod(t, e, mine)
	uid := func(name string) string {
		p := waitPod(t, e, ns, name, 30*time.Second, "created", func(*corev1.Pod) bool { return true })
		return string(p.UID)
	}
	tests := []struct {
		name     string
		args     extenderv1.ExtenderBindingArgs
		wantCode int
		want     string // in the answer's error
	}{
		{"another scheduler's pod", extenderv1.ExtenderBindingArgs{PodName: "other", PodNamespace: ns, PodUID: types.UID(uid("other")), Node: node},
			http.StatusOK, `schedulerName "other-scheduler"`},
		{"no pod UID", extenderv1.ExtenderBindingArgs{PodName: "other", PodNamespace: ns, Node: node},
			http.StatusBadRequest, "UID"},
		{"node the extender does not serve", extenderv1.ExtenderBindingArgs{PodName: "mine", PodNamespace: ns, PodUID: types.UID(uid("mine")), Node: "no-such-node"},
			http.StatusOK, "no-such-node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := postBind(ctx, t, e, tc.args)
			if code != tc.wantCode || !strings.Contains(msg, tc.want) {
				t.Errorf("bind: HTTP %d, error %q; want HTTP %d and an error containing %q", code, msg, tc.wantCode, tc.want)
			}
		})
	}
	stayUnbound(t, e, ns, "other", 2*time.Second)
	stayUnbound(t, e, ns, "mine", time.Second)
}

// postBind sends a bind with the tools' client certificate and returns the HTTP status and
// the error the extender gave (ExtenderBindingResult.Error, or the JSON error of a 4xx).
func postBind(ctx context.Context, t *testing.T, e *Env, args extenderv1.ExtenderBindingArgs) (int, string) {
	t.Helper()
	body, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.ExtenderURL+"/bind", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.ExtenderHTTP.Do(req)
	if err != nil {
		t.Fatalf("POST /bind: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Error string `json:"error"` // both ExtenderBindingResult and the 4xx body
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST /bind: HTTP %s, body %q is not JSON: %v", resp.Status, b, err)
	}
	return resp.StatusCode, out.Error
}

// CaseSlowBodies: four connections that announce 64 MiB bodies and then send a byte a
// second do not make the extender buffer them: its heap stays under 50 MiB.
func CaseSlowBodies(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	ctx := testContext(t, 2*time.Minute)
	u, err := url.Parse(e.ExtenderURL)
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := e.ExtenderHTTP.Transport.(*http.Transport)
	if !ok || tr.TLSClientConfig == nil {
		t.Fatalf("the suite's extender client has no TLS configuration")
	}
	answers := make(chan string, 4)
	// Each connection says once when the extender has it in hand: its second byte sent (a
	// body in progress), or, if the extender refused the announced length first, its answer
	// read. Only then is the heap worth reading.
	handled := make(chan struct{}, 4)
	for i := 0; i < 4; i++ {
		go func() {
			var once sync.Once
			signal := func() { once.Do(func() { handled <- struct{}{} }) }
			defer signal()
			conn, err := tls.Dial("tcp", u.Host, tr.TLSClientConfig.Clone())
			if err != nil {
				answers <- "dial: " + err.Error()
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(conn, "POST %s/filter HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
				u.Path, u.Host, 64<<20)
			for j := 0; j < 5; j++ {
				if _, err := conn.Write([]byte("{")); err != nil {
					break
				}
				if j == 1 {
					signal()
				}
				time.Sleep(time.Second)
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				answers <- "no answer: " + err.Error()
				return
			}
			answers <- strings.TrimSpace(line)
		}()
	}
	for i := 0; i < 4; i++ {
		select {
		case <-handled:
		case <-ctx.Done():
			t.Fatal("the slow connections were never under way nor answered")
		}
	}
	heap := extenderHeap(ctx, t, e)
	for i := 0; i < 4; i++ {
		t.Logf("slow connection %d: %s", i, <-answers)
	}
	t.Logf("extender heap while 4 connections announce 64 MiB each: %.1f MiB", float64(heap)/(1<<20))
	if heap > 50<<20 {
		t.Errorf("extender heap %d bytes, want under 50 MiB", heap)
	}
}

// extenderHeap reads go_memstats_heap_alloc_bytes from the extender's /metrics.
func extenderHeap(ctx context.Context, t *testing.T, e *Env) int64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ExtenderDiagnosticsURL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.ExtenderHTTP.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_alloc_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("go_memstats_heap_alloc_bytes %q: %v", v, err)
			}
			return int64(f)
		}
	}
	t.Fatalf("no go_memstats_heap_alloc_bytes in the extender's /metrics")
	return 0
}
