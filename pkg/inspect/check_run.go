package inspect

import (
	"context"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/transport"
)

// runCheck reads the three views, prints the comparison and returns an exitError: status 1
// when the views disagree, 2 when the API server or a component the user named could not be
// read.
func runCheck(ctx context.Context, flags *flagpole, node string, c cluster, streams genericiooptions.IOStreams) error {
	res := flags.resources()
	nodes, pods, err := fetchSharing(ctx, c.Client, node, res)
	if err != nil {
		return exitError{code: exitCheckIncomplete, err: explain(err)}
	}
	dra, err := fetchDRA(ctx, c.Client, nodes)
	if err != nil {
		return exitError{code: exitCheckIncomplete, err: explain(err)}
	}
	v := checkViews{Annotations: buildAnnotatedView(nodes, pods, res), Node: node, DRA: draNodes(nodes, dra), RunningPods: runningPods(pods)}
	httpc, err := flags.httpClient()
	if err != nil {
		return exitError{code: exitCheckIncomplete, err: err}
	}
	f := fetcher{Client: c.Client, HTTP: httpc}
	src := checkSources{
		ExtenderURL:       flags.ExtenderURL,
		ExtenderNamespace: flags.ExtenderNamespace,
		ExtenderService:   flags.ExtenderService,
		SharePluginURLs:   flags.SharePluginURLs,
	}
	ext, skipped := f.extender(ctx, src)
	v.Extender = ext
	if skipped != nil {
		v.NotChecked = append(v.NotChecked, *skipped)
	}
	names := make([]string, 0, len(v.Annotations.Nodes))
	for _, n := range v.Annotations.Nodes {
		// A DRA node's plugin serves its prepared claims (draPlugins), not /served.
		if _, dra := v.DRA[n.Name]; !dra {
			names = append(names, n.Name)
		}
	}
	reports, more := f.plugins(ctx, src, names, node)
	v.Plugins = reports
	v.NotChecked = append(v.NotChecked, more...)
	prepared, more := f.draPlugins(ctx, sortedKeys(v.DRA), node)
	v.DRAPrepared = prepared
	v.NotChecked = append(v.NotChecked, more...)

	r := compareViews(v)
	if err := render(streams.Out, flags, r, renderCheck); err != nil {
		return exitError{code: exitCheckIncomplete, err: fmt.Errorf("writing the check: %w", err)}
	}
	switch {
	case r.failedRequired():
		return exitError{code: exitCheckIncomplete, err: fmt.Errorf("check incomplete: a component given by URL could not be read (%d disagreement(s) among what was read)", len(r.Problems))}
	case len(r.Problems) > 0:
		return exitError{code: exitDisagreement, err: fmt.Errorf("check found %d disagreement(s)", len(r.Problems))}
	}
	return nil
}

// runningPods is the pods of pods that run, as "namespace/name".
func runningPods(pods []corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			out[p.Namespace+"/"+p.Name] = true
		}
	}
	return out
}

// renderCheck writes one line per problem, then the notes (reservations), the components
// not checked, and "ok: …" when nothing disagrees.
func renderCheck(w io.Writer, r checkReport) error {
	var lines []string
	for _, p := range r.Problems {
		lines = append(lines, p.Line)
	}
	for _, n := range r.Notes {
		lines = append(lines, "note: "+n)
	}
	for _, n := range r.NotChecked {
		lines = append(lines, n.String())
	}
	if r.OK {
		lines = append(lines, fmt.Sprintf("ok: %d nodes, %d cards, %d pods agree", r.Nodes, r.Cards, r.Pods))
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// httpClient is the client of the URLs given to --check: it presents the extender client
// certificate and trusts the extender CA when given (plain http:// URLs, such as
// share-plugin's, ignore both). Errors: a file that cannot be read or parsed.
func (f *flagpole) httpClient() (*http.Client, error) {
	cfg, err := transport.TLSConfigFor(&transport.Config{TLS: transport.TLSConfig{
		CertFile: f.ExtenderClientCert, KeyFile: f.ExtenderClientKey, CAFile: f.ExtenderCA,
	}})
	if err != nil {
		return nil, fmt.Errorf("loading --extender-client-cert, --extender-client-key, --extender-ca: %w", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}}, nil
}
