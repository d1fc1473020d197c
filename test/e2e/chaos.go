//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Chaos cases: each drives one way the ledger used to promise a card twice, then checks
// that no card is over capacity and that `kubectl inspect gpushare --check` is clean.

// a100x80 is an 80 GiB card (80 units).
var a100x80 = card{model: "NVIDIA A100-SXM4-80GB", mib: 81920}

// CaseChaosExtenderKills: with 5,000+ placed pods (so the pod LIST after a restart is slow),
// 300 pods are created while the extender is killed with SIGKILL ten times. Whatever the
// scheduler saw, no card may end above its size.
func CaseChaosExtenderKills(t *testing.T, e *Env) {
	requireBinary(t, e, "extender", "kubectl-inspect-gpushare")
	ns := newNamespace(t, e)
	ctx := testContext(t, 12*time.Minute)
	fast := fastClient(t, e)

	// 10 nodes x 8 cards x 80 units. 50 cards are filled completely and 30 hold 34 units, with
	// 1-unit pods bound at creation: 5,020 placed pods, 46 units free on each of 30 cards.
	const nodesN, cardsN, fullCards, partUnits = 10, 8, 50, 34
	label := "e2e-chaos-" + ns
	var nodes []string
	for i := 0; i < nodesN; i++ {
		cards := make([]card, cardsN)
		for j := range cards {
			cards[j] = a100x80
		}
		n := newKwokNodeCap(t, e, "chaos", "1000", cards...)
		patchNodeLabel(ctx, t, e, n, label)
		nodes = append(nodes, n)
	}
	var fillers []*corev1.Pod
	for k := 0; k < nodesN*cardsN; k++ {
		units := int64(80)
		if k >= fullCards {
			units = partUnits
		}
		node, idx := nodes[k/cardsN], k%cardsN
		for u := int64(0); u < units; u++ {
			fillers = append(fillers, placedPod(ns, fmt.Sprintf("fill-%d-%d-%d", k/cardsN, idx, u), node, idx, 1))
		}
	}
	start := time.Now()
	createAll(ctx, t, fast, fillers, 16)
	t.Logf("created %d placed pods in %s", len(fillers), time.Since(start).Round(time.Second))

	const podsN, podUnits = 300, 8
	stop := make(chan struct{})
	var kills sync.WaitGroup
	kills.Add(1)
	go func() {
		defer kills.Done()
		for i := 0; i < 10; i++ {
			select {
			case <-stop:
			case <-time.After(2 * time.Second):
			}
			if pid, err := e.ExtenderPID(); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
				exited(pid, 10*time.Second) // the restart below reports a process still running
			}
			if err := e.StartComponent(ctx, "extender"); err != nil {
				t.Errorf("restarting the extender after kill %d: %v", i+1, err)
				return
			}
		}
	}()
	var pods []*corev1.Pod
	for i := 0; i < podsN; i++ {
		p := gpuPod(ns, fmt.Sprintf("new-%03d", i), "", ctr{units: podUnits})
		p.Spec.NodeSelector = map[string]string{label: "true"}
		pods = append(pods, p)
	}
	// About 30 s of arrivals, across the kills.
	for i := 0; i < podsN; i += 10 {
		createAll(ctx, t, fast, pods[i:i+10], 10)
		time.Sleep(time.Second)
	}
	kills.Wait()
	close(stop)

	// 46 free units per partly filled card take five 8-unit pods: 150 at most.
	const maxBound = (80 - partUnits) / podUnits * (nodesN*cardsN - fullCards)
	bound := waitSettled(ctx, t, e, ns, "new-", 4*time.Minute)
	t.Logf("%d of %d pods bound (capacity %d)", bound, podsN, maxBound)
	if bound > maxBound {
		t.Errorf("%d pods bound, but the free cards only hold %d", bound, maxBound)
	}
	if bound == 0 {
		t.Errorf("no pod bound: the extender never came back")
	}
	assertLedgerSound(t, e)
}

// CaseChaosDelayedBinding: a proxy in front of the API server holds the extender's Binding
// writes past the scheduler's extender timeout (10 s), so the scheduler retries the bind
// while the first Binding is still on its way. Rivals created meanwhile must not get the card
// the first Binding lands on.
func CaseChaosDelayedBinding(t *testing.T, e *Env) {
	requireBinary(t, e, "extender", "kubectl-inspect-gpushare")
	ctx := testContext(t, 5*time.Minute)
	proxy := startBindingDelayProxy(t, e, 15*time.Second)
	if err := e.RestartComponent(ctx, "extender", "GPUSHARE_EXTENDER_KUBECONFIG="+proxy.kubeconfig); err != nil {
		t.Fatalf("restarting the extender behind the delaying proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := e.RestartComponent(context.Background(), "extender"); err != nil {
			t.Errorf("restoring the extender: %v", err)
		}
	})
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "slowbind", v100, v100)
	createPod(t, e, gpuPod(ns, "slow", node, ctr{units: 16}))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return proxy.held.Load() > 0, nil
	})
	if err != nil {
		t.Fatal("the extender never sent a Binding through the proxy")
	}
	for _, n := range []string{"rival-a", "rival-b"} {
		createPod(t, e, gpuPod(ns, n, node, ctr{units: 16}))
	}
	waitPod(t, e, ns, "slow", 2*time.Minute, "Running after its delayed Binding landed", isRunning)
	// One rival takes the other card; the second has nowhere to go.
	bound := waitSettled(ctx, t, e, ns, "rival-", time.Minute)
	if bound != 1 {
		t.Errorf("%d rivals bound next to slow on two 16-unit cards, want 1", bound)
	}
	t.Logf("Binding writes held by the proxy: %d", proxy.held.Load())
	assertLedgerSound(t, e)
}

// CaseChaosTenantEdits: the tenant of a running pod overwrites its allocation record with
// zero units, garbage and another card. Pods created after each edit must still find its
// card full, and share-plugin puts the true record back.
func CaseChaosTenantEdits(t *testing.T, e *Env) {
	ctx, ns := twoCardRealNode(t, e, 8*time.Minute)
	createPod(t, e, gpuPod(ns, "victim", e.RealNode, ctr{units: 14}))
	waitPod(t, e, ns, "victim", 2*time.Minute, "Running", isRunning)
	_, cards := recordedCards(ctx, t, e, ns, "victim")
	if len(cards) != 1 {
		t.Fatalf("victim's record names cards %v, want one", cards)
	}
	mine, other := cards[0], 1-cards[0]
	// Each 7-unit pod created after an edit fits the node (28 units) and must land on the
	// other card: the victim's card stays full whatever its record says.
	edits := []string{
		`{"0":{"` + strconv.Itoa(mine) + `":0}}`,
		`{not json`,
	}
	for i, edit := range edits {
		patchAllocation(ctx, t, e, ns, "victim", edit)
		name := fmt.Sprintf("after-edit-%d", i)
		createPod(t, e, gpuPod(ns, name, e.RealNode, ctr{units: 7}))
		waitPod(t, e, ns, name, 2*time.Minute, "Running", isRunning)
		if _, c := recordedCards(ctx, t, e, ns, name); len(c) != 1 || c[0] != other {
			t.Errorf("after the edit %s, %s got cards %v, want card %d (card %d runs victim)", edit, name, c, other, mine)
		}
	}
	// Moving the record onto the other card, now full, frees nothing.
	patchAllocation(ctx, t, e, ns, "victim", `{"0":{"`+strconv.Itoa(other)+`":14}}`)
	createPod(t, e, gpuPod(ns, "after-move", e.RealNode, ctr{units: 7}))
	waitFailedScheduling(t, e, ns, "after-move", "gpu-mem")
	// share-plugin restores the record of the container it served.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		_, c := recordedCards(ctx, t, e, ns, "victim")
		return len(c) == 1 && c[0] == mine, nil
	})
	if err != nil {
		p, _ := recordedCards(ctx, t, e, ns, "victim")
		t.Errorf("victim's record was not restored to card %d: %s=%s", mine, gpushare.AnnotationAllocation, p.Annotations[gpushare.AnnotationAllocation])
	}
	assertLedgerSound(t, e)
}

// CaseChaosSelfPlaced: a pod created with spec.nodeName and a record stating 0 units gets a
// card chosen by share-plugin under the node's ledger, its record tells the truth, and the
// extender counts it: the next 14-unit pod goes to the other card, a third waits.
func CaseChaosSelfPlaced(t *testing.T, e *Env) {
	ctx, ns := twoCardRealNode(t, e, 6*time.Minute)
	self := gpuPod(ns, "self", "", ctr{units: 14})
	self.Spec.NodeSelector = nil
	self.Spec.NodeName = e.RealNode
	self.Annotations = map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":0}}`}
	createPod(t, e, self)
	waitPod(t, e, ns, "self", 2*time.Minute, "Running", isRunning)
	_, cards := recordedCards(ctx, t, e, ns, "self")
	if len(cards) != 1 {
		t.Fatalf("self's record names cards %v after share-plugin served it, want one card", cards)
	}
	createPod(t, e, gpuPod(ns, "next", e.RealNode, ctr{units: 14}))
	waitPod(t, e, ns, "next", 2*time.Minute, "Running", isRunning)
	if _, c := recordedCards(ctx, t, e, ns, "next"); len(c) != 1 || c[0] == cards[0] {
		t.Errorf("next got cards %v; self runs on card %d", c, cards[0])
	}
	createPod(t, e, gpuPod(ns, "third", e.RealNode, ctr{units: 4}))
	waitFailedScheduling(t, e, ns, "third", string(res.Mem))
	assertLedgerSound(t, e)
}

// CaseChaosSameSizePods: pairs of same-size pods on two cards, bound one after the other;
// however kubelet orders their admission, each container runs on the card its record names.
func CaseChaosSameSizePods(t *testing.T, e *Env) {
	_, ns := twoCardRealNode(t, e, 8*time.Minute)
	for round := 0; round < 3; round++ {
		a, b := fmt.Sprintf("a-%d", round), fmt.Sprintf("b-%d", round)
		createPod(t, e, gpuPod(ns, b, e.RealNode, ctr{units: 14}))
		createPod(t, e, gpuPod(ns, a, e.RealNode, ctr{units: 14}))
		waitPod(t, e, ns, a, 2*time.Minute, "Running", isRunning)
		waitPod(t, e, ns, b, 2*time.Minute, "Running", isRunning)
		assertLedgerSound(t, e)
		deletePod(t, e, ns, a)
		deletePod(t, e, ns, b)
	}
}

// twoCardRealNode prepares a chaos case on the real node with two simulated T4s: it skips
// without a real node, and returns the case's context and namespace.
func twoCardRealNode(t *testing.T, e *Env, d time.Duration) (context.Context, string) {
	t.Helper()
	requireRealNode(t, e)
	requireBinary(t, e, "share-plugin", "kubectl-inspect-gpushare")
	ctx := testContext(t, d)
	_ = restartSharePlugin(ctx, t, e, "t4:2")
	return ctx, newNamespace(t, e)
}

// restartSharePlugin runs share-plugin with simulated T4s ("t4:N") and extraEnv (KEY=value
// for hack/cluster-up.sh) for the test, waits until the node advertises them, returns the
// node's inventory, and puts the default back at the end.
func restartSharePlugin(ctx context.Context, t *testing.T, e *Env, simulate string, extraEnv ...string) gpushare.Inventory {
	t.Helper()
	if err := e.RestartComponent(ctx, "share-plugin", append([]string{"GPUSHARE_SIMULATE=" + simulate}, extraEnv...)...); err != nil {
		t.Fatalf("restarting share-plugin with %s: %v", simulate, err)
	}
	t.Cleanup(func() {
		if err := e.RestartComponent(context.Background(), "share-plugin"); err != nil {
			t.Errorf("restoring share-plugin: %v", err)
			return
		}
		// The next case's pods must not reach kubelet before it has the cards again.
		waitFor(context.Background(), t, 90*time.Second, "kubelet to read the restored share-plugin's devices", func() bool {
			return listAndWatchStreams(context.Background(), e.SharePluginURL) > 0
		})
	})
	cards, err := strconv.Atoi(simulate[len("t4:"):])
	if err != nil {
		t.Fatalf("simulate %q: want t4:N", simulate)
	}
	var inv gpushare.Inventory
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		q := n.Status.Allocatable[res.Mem]
		inv, _, err = res.NodeInventory(n)
		return err == nil && q.Value() == int64(14*cards) && len(inv.Devices) == cards, nil
	})
	if err != nil {
		t.Fatalf("node %s never advertised %s (%d units, %d cards in the inventory): %v", e.RealNode, simulate, 14*cards, cards, err)
	}
	// The node's status may still be the previous instance's, and kubelet admits no gpu-mem
	// pod until it has read this instance's device list.
	waitFor(ctx, t, 90*time.Second, "kubelet to read the restarted share-plugin's devices", func() bool {
		return listAndWatchStreams(ctx, e.SharePluginURL) > 0
	})
	return inv
}

// listAndWatchStreams reads share-plugin's gpushare_plugin_list_and_watch_streams at url: the
// ListAndWatch streams whose device list kubelet was sent; 0 while share-plugin does not answer.
func listAndWatchStreams(ctx context.Context, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "gpushare_plugin_list_and_watch_streams{") {
			continue
		}
		if n, err := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:]); err == nil {
			return n
		}
	}
	return 0
}

// placedPod is a 1-container pod bound at creation to node with units on card idx, its
// record written as the extender writes it: what a cluster full of running pods looks like.
func placedPod(ns, name, node string, idx int, units int64) *corev1.Pod {
	p := gpuPod(ns, name, node, ctr{units: units})
	p.Spec.NodeSelector = nil
	p.Spec.NodeName = node
	var a gpushare.PodAllocation
	a.Set(gpushare.ContainerRef{Index: 0}, gpushare.CardUnits{idx: units})
	p.Annotations = gpushare.BindAnnotations(a, units, gpushare.CardUnits{idx: 80}, gpushare.GiB, time.Now())
	return p
}

// fastClient is a client without the suite's rate limit, for creating thousands of pods.
func fastClient(t *testing.T, e *Env) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(e.Rest)
	cfg.QPS, cfg.Burst = 2000, 2000
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createAll creates pods with `workers` goroutines.
func createAll(ctx context.Context, t *testing.T, c kubernetes.Interface, pods []*corev1.Pod, workers int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(pods) {
					return
				}
				if _, err := c.CoreV1().Pods(pods[i].Namespace).Create(ctx, pods[i], metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("creating pod %s: %w", pods[i].Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// patchNodeLabel sets label=true on a node.
func patchNodeLabel(ctx context.Context, t *testing.T, e *Env, node, label string) {
	t.Helper()
	body := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, label)
	if _, err := e.Client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling node %s: %v", node, err)
	}
}

// waitSettled waits until the number of bound pods whose name starts with prefix has not
// changed for 20 s (or max passes) and returns it.
func waitSettled(ctx context.Context, t *testing.T, e *Env, ns, prefix string, max time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(max)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		l, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!="})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range l.Items {
			if len(p.Name) >= len(prefix) && p.Name[:len(prefix)] == prefix {
				n++
			}
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > 20*time.Second {
			return n
		}
		time.Sleep(time.Second)
	}
	return last
}

// bindingDelayProxy forwards to the API server with the suite's credentials and holds every
// POST to a pods/binding subresource for delay first; a Binding whose client gives up
// meanwhile is dropped. With cutLeases set it refuses every Lease write (503), as for a
// replica cut off from the API server's leases but not from the rest.
type bindingDelayProxy struct {
	kubeconfig         string
	held               atomic.Int64 // Bindings held
	forwarded, dropped atomic.Int64 // held Bindings sent on after the delay, dropped before
	cutLeases          atomic.Bool
}

func startBindingDelayProxy(t *testing.T, e *Env, delay time.Duration) *bindingDelayProxy {
	t.Helper()
	target, err := url.Parse(e.Rest.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1 // watches stream
	p := &bindingDelayProxy{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.cutLeases.Load() && r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/leases") {
			http.Error(w, "lease writes cut off by the test", http.StatusServiceUnavailable)
			return
		}
		if r.Method == http.MethodPost && filepath.Base(r.URL.Path) == "binding" {
			p.held.Add(1)
			// Read the body first: the server notices a client that gave up (and ends
			// r.Context()) only once the request body has been read.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				p.dropped.Add(1)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			select {
			case <-time.After(delay):
				p.forwarded.Add(1)
			case <-r.Context().Done():
				p.dropped.Add(1)
				return
			}
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + ln.Addr().String()}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
