package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Where --check finds the extender and share-plugin when no URL is given: through the API
// server's service and pod proxies, with the names deploy/ uses.
const (
	defaultExtenderNamespace = metav1.NamespaceSystem
	defaultExtenderService   = "gpushare-extender"
	// The extender's diagnostics port, which serves inspect (HTTPS).
	extenderServicePort   = "diagnostics"
	extenderServiceScheme = "https"

	pluginNamespace  = metav1.NamespaceSystem
	pluginSelector   = "app.kubernetes.io/name=share-plugin"
	pluginPort       = "9401"
	pluginServedPath = gpushare.ServedPath
	// The DRA plugin's DaemonSet (deploy/dra), on the same port.
	draPluginSelector = "app.kubernetes.io/name=gpushare-dra-plugin"
)

const (
	// maxViewBytes bounds an answer read from a URL: a ledger of thousands of nodes is a few
	// MiB; more means something else answered.
	maxViewBytes = 64 << 20
	// fetchParallel share-plugins are asked at once: enough for large clusters without
	// flooding the API server's proxy.
	fetchParallel = 8
	// httpTimeout bounds one direct GET (the API server's proxy uses the client's own
	// --request-timeout).
	httpTimeout = 30 * time.Second
)

// checkSources says where the extender and share-plugins are; empty URLs mean through the
// API server.
type checkSources struct {
	ExtenderURL       string
	ExtenderNamespace string
	ExtenderService   string
	SharePluginURLs   []string
}

// fetcher reads the extender's and share-plugins' views: by URL with HTTP, else through the
// API server's proxy with Client.
type fetcher struct {
	Client kubernetes.Interface
	HTTP   *http.Client
}

// extender returns the extender's ledger, or why it could not be read (Required when the
// user named its URL).
func (f fetcher) extender(ctx context.Context, src checkSources) (*gpushare.InspectReport, *notChecked) {
	var body []byte
	var err error
	if src.ExtenderURL != "" {
		body, err = f.get(ctx, strings.TrimRight(src.ExtenderURL, "/")+gpushare.InspectPath)
	} else {
		body, err = doRaw(ctx, f.Client.CoreV1().Services(src.ExtenderNamespace).ProxyGet(extenderServiceScheme, src.ExtenderService, extenderServicePort, gpushare.InspectPath, nil))
		if err != nil {
			err = fmt.Errorf("through service %s/%s: %w", src.ExtenderNamespace, src.ExtenderService, err)
		}
	}
	var v gpushare.InspectReport
	if err == nil {
		err = decodeStrict(body, &v, "the extender's /inspect answer")
	}
	if err != nil {
		return nil, &notChecked{Component: "extender", Reason: oneLine(err.Error()), Required: src.ExtenderURL != ""}
	}
	return &v, nil
}

// pluginKind is one of the node agents --check reads: how its pods are found and named,
// and the path of its answer.
type pluginKind struct {
	name     string // how not-checked lines name it: "share-plugin"
	selector string // its pods' label selector in pluginNamespace
	path     string // the path of its answer on pluginPort
}

// plugins returns the served-cards answers of the share-plugins: those of SharePluginURLs,
// else of every share-plugin pod on nodes (only those on node when it is set). What could
// not be read, and the nodes no answer covers, are listed as not checked.
func (f fetcher) plugins(ctx context.Context, src checkSources, nodes []string, node string) ([]gpushare.ServedReport, []notChecked) {
	return readPlugins(ctx, f, pluginKind{name: "share-plugin", selector: pluginSelector, path: pluginServedPath}, src.SharePluginURLs, nodes, node, func(r *gpushare.ServedReport) *string { return &r.Node })
}

// draPlugins returns the prepared-claims answers of the DRA plugin pods on nodes (only those
// on node when it is set), read through the API server's pod proxy. What could not be read,
// and the nodes no answer covers, are listed as not checked.
func (f fetcher) draPlugins(ctx context.Context, nodes []string, node string) ([]gpushare.DRAPreparedReport, []notChecked) {
	if len(nodes) == 0 {
		return nil, nil
	}
	return readPlugins(ctx, f, pluginKind{name: "gpushare-dra-plugin", selector: draPluginSelector, path: gpushare.DRAPreparedPath}, nil, nodes, node, func(r *gpushare.DRAPreparedReport) *string { return &r.Node })
}

// readPlugins reads the answers of kind's agents: those of urls, else of every pod of kind on
// nodes (only those on node when it is set), each decoded into a T whose node nodeOf points
// at (an answer naming no node is its pod's). What could not be read, and the nodes no answer
// covers, are listed as not checked; required when urls were given.
func readPlugins[T any](ctx context.Context, f fetcher, kind pluginKind, urls []string, nodes []string, node string, nodeOf func(*T) *string) ([]T, []notChecked) {
	var targets []pluginTarget
	var skipped []notChecked
	if len(urls) > 0 {
		for _, u := range urls {
			url := strings.TrimRight(u, "/") + kind.path
			targets = append(targets, pluginTarget{component: kind.name + " at " + u, get: func(ctx context.Context) ([]byte, error) { return f.get(ctx, url) }})
		}
	} else {
		pods, err := f.pluginPods(ctx, kind, node)
		if err != nil {
			return nil, []notChecked{{Component: kind.name, Reason: oneLine(err.Error())}}
		}
		if len(pods) == 0 {
			return nil, []notChecked{{Component: kind.name, Reason: fmt.Sprintf("no running pod labelled %s in %s", kind.selector, pluginNamespace)}}
		}
		for _, p := range pods {
			name := p.Name
			targets = append(targets, pluginTarget{
				component: fmt.Sprintf("%s on node %s (pod %s/%s)", kind.name, p.Spec.NodeName, p.Namespace, p.Name),
				node:      p.Spec.NodeName,
				get: func(ctx context.Context) ([]byte, error) {
					return doRaw(ctx, f.Client.CoreV1().Pods(pluginNamespace).ProxyGet("http", name, pluginPort, kind.path, nil))
				},
			})
		}
	}
	reports := make([]*T, len(targets))
	errs := make([]error, len(targets))
	what := kind.name + "'s " + kind.path + " answer"
	parallel(len(targets), func(i int) {
		body, err := targets[i].get(ctx)
		if err != nil {
			errs[i] = err
			return
		}
		var r T
		if err := decodeStrict(body, &r, what); err != nil {
			errs[i] = err
			return
		}
		n := nodeOf(&r)
		if *n == "" {
			*n = targets[i].node
		}
		if *n == "" {
			errs[i] = errors.New(what + " names no node")
			return
		}
		reports[i] = &r
	})
	var out []T
	covered := map[string]bool{}
	required := len(urls) > 0
	for i, r := range reports {
		if r == nil {
			skipped = append(skipped, notChecked{Component: targets[i].component, Reason: oneLine(errs[i].Error()), Required: required})
			continue
		}
		out = append(out, *r)
		covered[*nodeOf(r)] = true
		covered[targets[i].node] = true
	}
	for _, n := range nodes {
		if !covered[n] && !triedOn(targets, n) {
			skipped = append(skipped, notChecked{Component: kind.name + " on node " + n, Reason: "no " + kind.name + " answered for this node"})
		}
	}
	return out, skipped
}

// pluginTarget is one agent to ask.
type pluginTarget struct {
	component string // how not-checked lines name it
	node      string // the pod's node; "" for a URL
	get       func(context.Context) ([]byte, error)
}

// triedOn reports a pod target on node n (its failure, if any, is already listed).
func triedOn(targets []pluginTarget, n string) bool {
	for _, t := range targets {
		if t.node == n {
			return true
		}
	}
	return false
}

// pluginPods lists the running pods of kind (on node only, when set).
func (f fetcher) pluginPods(ctx context.Context, kind pluginKind, node string) ([]corev1.Pod, error) {
	opts := metav1.ListOptions{LabelSelector: kind.selector, FieldSelector: "status.phase=Running", Limit: pageSize}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + fields.EscapeValue(node) + "," + opts.FieldSelector
	}
	var out []corev1.Pod
	for {
		l, err := f.Client.CoreV1().Pods(pluginNamespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s pods (%s in %s): %w", kind.name, kind.selector, pluginNamespace, err)
		}
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				out = append(out, p)
			}
		}
		if l.Continue == "" {
			return out, nil
		}
		opts.Continue = l.Continue
	}
}

// get reads url with a GET; any status but 200 is an error carrying the start of the body.
func (f fetcher) get(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building GET %s: %w", url, err)
	}
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return nil, err // *url.Error already names the method and URL
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxViewBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, truncate(strings.TrimSpace(string(body)), 200))
	}
	if len(body) > maxViewBytes {
		return nil, fmt.Errorf("GET %s: answer larger than %d bytes", url, maxViewBytes)
	}
	return body, nil
}

// doRaw runs an API-server proxy request; a nil wrapper (only fakes return one) is an error,
// not a panic.
func doRaw(ctx context.Context, w restclient.ResponseWrapper) ([]byte, error) {
	if w == nil {
		return nil, errors.New("the API server's proxy gave no response")
	}
	return w.DoRaw(ctx)
}

// decodeStrict decodes a JSON object into v; what names the answer in the error.
func decodeStrict(body []byte, v any, what string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding %s: %w", what, err)
	}
	return nil
}

// parallel runs fn(0..n-1), at most fetchParallel at a time, and waits for all.
func parallel(n int, fn func(i int)) {
	sem := make(chan struct{}, fetchParallel)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
