//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Leader election in the failover case: shorter than the deploy defaults so that the case
// stays short; the ratio is kube-scheduler's (lease : renew : retry = 15 : 10 : 2).
var failoverLeaseArgs = []string{
	"--leader-elect", "--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s",
	"--leader-elect-retry-period=1s",
}

// replica is one extender process the failover case runs.
type replica struct {
	name              string
	port, diagnostics int
	// kubeconfig defaults to the cluster's; args are added to the common ones.
	kubeconfig string
	args       []string
	cmd        *exec.Cmd
	done       chan struct{}
}

// CaseExtenderFailover: two extender replicas with leader election behind a proxy that
// routes to the leader (what the Service selecting the leader's label does); the leader is killed with SIGKILL while 200 pods are being
// scheduled. Binding resumes within 15 s, every pod ends bound, no card is over capacity and
// the ledger check is clean.
func CaseExtenderFailover(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	requireBinary(t, e, "kubectl-inspect-gpushare")
	ctx := testContext(t, 8*time.Minute)
	replicas := replicaPair(ctx, t, e)
	for _, r := range replicas {
		startReplica(t, e, r)
	}
	proxy := newReadinessProxy(t, e, replicas)
	var leader *replica
	waitFor(ctx, t, time.Minute, "a leader", func() bool { leader = proxy.ready(); return leader != nil })
	t.Logf("leader: %s", leader.name)

	ns := newNamespace(t, e)
	label := "e2e-failover-" + ns
	for i := 0; i < 4; i++ {
		cards := make([]card, 8)
		for j := range cards {
			cards[j] = a100x80
		}
		patchNodeLabel(ctx, t, e, newKwokNode(t, e, "failover", cards...), label)
	}
	const podsN = 200
	var pods []*corev1.Pod
	for i := 0; i < podsN; i++ {
		p := gpuPod(ns, fmt.Sprintf("p-%03d", i), "", ctr{units: 4})
		p.Spec.NodeSelector = map[string]string{label: "true"}
		pods = append(pods, p)
	}
	created := make(chan struct{})
	go func() {
		defer close(created)
		for i := 0; i < podsN; i += 10 {
			createAll(ctx, t, fastClient(t, e), pods[i:i+10], 10)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	waitFor(ctx, t, 2*time.Minute, "40 pods bound before the kill", func() bool { return countBound(ctx, t, e, ns) >= 40 })
	before := countBound(ctx, t, e, ns)
	killed := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", leader.name, err)
	}
	<-leader.done
	var resumed time.Duration
	waitFor(ctx, t, time.Minute, "binding to resume after the kill", func() bool {
		if countBound(ctx, t, e, ns) > before {
			resumed = time.Since(killed)
			return true
		}
		return false
	})
	next := "none"
	if r := proxy.ready(); r != nil {
		next = r.name
	}
	t.Logf("killed %s with %d pods bound; binding resumed after %s (leader now %s)", leader.name, before,
		resumed.Round(100*time.Millisecond), next)
	if resumed > 15*time.Second {
		t.Errorf("binding resumed %s after the leader was killed, want within 15s", resumed.Round(100*time.Millisecond))
	}
	<-created
	bound := waitSettled(ctx, t, e, ns, "p-", 3*time.Minute)
	if bound != podsN {
		t.Errorf("%d of %d pods bound after the failover, want all (the nodes hold 640)", bound, podsN)
	}
	assertLedgerSound(t, e)
}

// replicaPair stops the cluster's extender (it is started again at the end of the test)
// and returns two replicas to start on ports of their own; newReadinessProxy serves the
// cluster extender's ports in front of them.
func replicaPair(ctx context.Context, t *testing.T, e *Env) []*replica {
	t.Helper()
	if err := e.StopComponent(ctx, "extender"); err != nil {
		t.Fatalf("stopping the cluster's extender: %v", err)
	}
	t.Cleanup(func() {
		if err := e.StartComponent(context.Background(), "extender"); err != nil {
			t.Errorf("restarting the cluster's extender: %v", err)
		}
	})
	return []*replica{
		{name: "extender-a", port: e.cfg.extenderPort + 100, diagnostics: e.cfg.extenderDiagnosticsPort + 100},
		{name: "extender-b", port: e.cfg.extenderPort + 200, diagnostics: e.cfg.extenderDiagnosticsPort + 200},
	}
}

// startReplica runs one extender with leader election and the cluster's TLS material; it
// is killed at the end of the test.
func startReplica(t *testing.T, e *Env, r *replica) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.cfg.state, "logs", r.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := r.kubeconfig
	if kubeconfig == "" {
		kubeconfig = e.Kubeconfig
	}
	args := append([]string{
		"--kubeconfig", kubeconfig, "--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(r.port), "--diagnostics-port", strconv.Itoa(r.diagnostics),
		"--tls-cert-file", filepath.Join(e.ExtenderPKI, "extender.crt"),
		"--tls-private-key-file", filepath.Join(e.ExtenderPKI, "extender.key"),
		"--client-ca-file", filepath.Join(e.ExtenderPKI, "ca.crt"),
		// kube-scheduler's and the tools' certificates (hack/lib/certs.sh).
		"--client-allowed-names", "kube-scheduler,gpushare-admin",
		"--policy", "binpack", "--node-selector", "cgpu=true",
	}, failoverLeaseArgs...)
	args = append(args, r.args...)
	r.cmd = exec.Command(e.Bin("extender"), args...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", r.name, err)
	}
	r.done = make(chan struct{})
	go func() {
		_ = r.cmd.Wait()
		_ = logf.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
	})
}

// readinessProxy forwards each new TCP connection (TLS passes through) to the replica that
// leads (gpushare_leader 1 in its /metrics), as the Service routes to the pod the leader
// labels; with none leading it closes the connection.
type readinessProxy struct {
	e        *Env
	replicas []*replica
}

// newReadinessProxy serves the cluster extender's verbs and diagnostics ports in front of
// replicas.
func newReadinessProxy(t *testing.T, e *Env, replicas []*replica) *readinessProxy {
	t.Helper()
	p := &readinessProxy{e: e, replicas: replicas}
	p.listen(t, e.cfg.extenderPort, func(r *replica) int { return r.port })
	p.listen(t, e.cfg.extenderDiagnosticsPort, func(r *replica) int { return r.diagnostics })
	return p
}

// ready returns the replica that leads (nil when none).
func (p *readinessProxy) ready() *replica {
	for _, r := range p.replicas {
		select {
		case <-r.done:
			continue
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", r.diagnostics), nil)
		resp, err := p.e.ExtenderHTTP.Do(req)
		if err != nil {
			cancel()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "\ngpushare_leader 1\n") {
			return r
		}
	}
	return nil
}

// listen serves port, forwarding to port(ready replica).
func (p *readinessProxy) listen(t *testing.T, port int, backend func(*replica) int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("proxy on port %d: %v", port, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c, backend)
		}
	}()
}

func (p *readinessProxy) forward(c net.Conn, backend func(*replica) int) {
	defer c.Close()
	r := p.ready()
	if r == nil {
		return
	}
	b, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(backend(r))))
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
}

// countBound is the number of pods of ns bound to a node.
func countBound(ctx context.Context, t *testing.T, e *Env, ns string) int {
	t.Helper()
	l, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// waitFor polls cond every 200 ms until it holds, failing the test after d.
func waitFor(ctx context.Context, t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
