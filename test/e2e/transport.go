//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// CaseAnonymousBindRefusedAtTLS: a caller without a client certificate of the extender's CA
// cannot bind a pod. Its /bind over TLS ends at the handshake, plain HTTP to the verbs port
// gets no extender answer, and the pod (of a scheduler that does not exist, so nothing else
// binds it) stays unbound. The same call with the tools' certificate gets an HTTP answer,
// so the refusal is the missing certificate's. On the diagnostics port the probes answer
// anyone and /metrics only a client with a certificate.
func CaseAnonymousBindRefusedAtTLS(t *testing.T, e *Env) {
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "tls", card{model: "Tesla T4", mib: 15360})
	pod := gpuPod(ns, "orphan", node, ctr{units: 2})
	pod.Spec.SchedulerName = "no-such-scheduler"
	createPod(t, e, pod)
	ctx := testContext(t, time.Minute)
	created, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading pod %s/%s: %v", ns, pod.Name, err)
	}
	args, err := json.Marshal(extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: ns, PodUID: created.UID, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := e.extenderClient(false)
	if err != nil {
		t.Fatal(err)
	}
	post := func(c *http.Client, url string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp, string(b), nil
	}

	resp, body, err := post(anonymous, e.ExtenderURL+"/bind")
	if err == nil {
		t.Errorf("anonymous /bind over TLS got HTTP %s %q, want the handshake refused", resp.Status, body)
	} else if !strings.Contains(err.Error(), "tls") && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("anonymous /bind over TLS failed with %v, want a TLS refusal", err)
	}

	plainURL := "http://" + strings.TrimPrefix(e.ExtenderURL, "https://") + "/bind"
	resp, body, err = post(&http.Client{Timeout: 10 * time.Second}, plainURL)
	if err == nil && (resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "HTTPS")) {
		t.Errorf("plain-HTTP /bind got HTTP %s %q, want Go's 400 for HTTP sent to an HTTPS server", resp.Status, body)
	}

	stayUnbound(t, e, ns, pod.Name, 3*time.Second)

	// The same request with a certificate passes the handshake and reaches the handler.
	if args, err = json.Marshal(extenderv1.ExtenderBindingArgs{PodName: "no-such-pod", PodNamespace: ns, PodUID: "0", Node: node}); err != nil {
		t.Fatal(err)
	}
	resp, body, err = post(e.ExtenderHTTP, e.ExtenderURL+"/bind")
	if err != nil {
		t.Fatalf("/bind with the tools' certificate: %v, want an HTTP answer", err)
	}
	t.Logf("/bind of a pod that does not exist, with a certificate: HTTP %s %s", resp.Status, strings.TrimSpace(body))

	for _, c := range []struct {
		path   string
		client *http.Client
		want   int
	}{
		{"/healthz", anonymous, http.StatusOK},
		{"/readyz", anonymous, http.StatusOK},
		{"/metrics", anonymous, http.StatusUnauthorized},
		{"/gpushare-scheduler/inspect", anonymous, http.StatusUnauthorized},
		{"/metrics", e.ExtenderHTTP, http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ExtenderDiagnosticsURL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", c.path, err)
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s (client certificate: %v): HTTP %s, want %d", c.path, c.client == e.ExtenderHTTP, resp.Status, c.want)
		}
	}

	// The verbs port serves no diagnostics, even to a client with a certificate.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(e.ExtenderURL, "/gpushare-scheduler")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := e.ExtenderHTTP.Do(req); err != nil {
		t.Errorf("GET /metrics on the verbs port: %v, want 404", err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /metrics on the verbs port: HTTP %s, want 404", resp.Status)
		}
	}
	p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading pod %s/%s: %v", ns, pod.Name, err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("pod %s/%s was bound to %s by an anonymous caller", ns, pod.Name, p.Spec.NodeName)
	}
}
