package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/serving"
	"github.com/gpushare/gpushare/pkg/version"
)

// run serves the extender until ctx is done, the lease is lost, the cache stops or a
// server fails: it builds the client, the cache over the pod and node informers, the
// routes and the listeners, then starts the transport, the informers, the cache, the
// servers and the election (startElection), and waits (await).
func run(ctx context.Context, o *options) error {
	pol, res, sel, err := o.validate()
	if err != nil {
		return err
	}
	transport, err := serving.New(o.servingOptions())
	if err != nil {
		return err
	}
	logStart(o, transport, pol, res, sel)
	client, err := newClient(o)
	if err != nil {
		return err
	}
	factory, c, stopEvents, err := newCache(ctx, o, client, pol, res, sel)
	if err != nil {
		return err
	}
	defer stopEvents()
	m := metrics.New(c)
	rt, err := newRoutes(ctx, o, client, c, m, pol, res, sel)
	if err != nil {
		return err
	}
	servers, err := openServers(ctx, o, transport, rt.handlers, m)
	if err != nil {
		return err
	}
	tctx, stopTransport := context.WithCancel(ctx)
	defer stopTransport()
	go transport.Run(tctx)
	// Their own stop, ended on every return: Shutdown waits for the informers to stop, and
	// ctx is not done when run returns for a lost lease or a server error.
	informersCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informersCtx.Done())
	defer factory.Shutdown()
	defer stopInformers()
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- c.Run(ctx) }()
	serveDone, err := serve(servers, o.timeouts)
	if err != nil {
		return err
	}
	el := startElection(ctx, c, rt.elector)
	defer el.cancel()
	return await(ctx, o, servers, serveDone, cacheDone, el)
}

// logStart logs the extender's settings.
func logStart(o *options, transport *serving.Transport, pol policy.Policy, res gpushare.Resources, sel labels.Selector) {
	host := o.servingOptions().Host()
	klog.InfoS("starting gpushare extender", "version", version.Version, "tls", !transport.Insecure(), "clientAllowedNames", o.clientNames,
		"verbsAddress", net.JoinHostPort(host, strconv.Itoa(o.port)), "diagnosticsAddress", net.JoinHostPort(host, strconv.Itoa(o.diagnosticsPort)),
		"policy", pol.Name(), "nodeSelector", sel.String(), "memResource", res.Mem, "countResource", res.Count,
		"reservationTTL", o.reservationTTL, "unrecordedGrace", o.unrecordedGrace, "maxRequestBytes", o.maxRequestBytes, "kubeconfig", o.kubeconfig)
}

// newClient is the API client of --kubeconfig (in-cluster without), with --qps and --burst.
// Errors: no configuration, a client that cannot be built.
func newClient(o *options) (kubernetes.Interface, error) {
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	// Protobuf, as kube-scheduler and the controllers speak it: the API server encodes each
	// watch event once per format, and the scheduler already asks for protobuf, so the
	// extender's pod and node watches and its bind writes cost the API server less than in
	// JSON, and decoding costs the extender less.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the kubernetes client: %w", err)
	}
	return client, nil
}

// newCache is the ledger (pkg/cache) over the informers of the nodes sel selects and of
// every pod, which the caller starts, and the event recorder of its warnings; stopEvents
// shuts the recorder down. Errors: those of cache.New.
func newCache(ctx context.Context, o *options, client kubernetes.Interface, pol policy.Policy, res gpushare.Resources, sel labels.Selector) (
	factory informers.SharedInformerFactory, c *cache.Cache, stopEvents func(), err error) {
	factory = informers.NewSharedInformerFactory(client, 0)
	nodes := factory.InformerFor(&corev1.Node{}, func(c kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
		return coreinformers.NewFilteredNodeInformer(c, resync, toolscache.Indexers{}, func(lo *metav1.ListOptions) {
			lo.LabelSelector = sel.String()
		})
	})
	// The cache turns both informers' stores into slim objects: no lister of them works.
	pods := factory.Core().V1().Pods().Informer()
	// A workload-aware policy (fgd) needs free CPU/memory per node and the pod shapes seen.
	_, track := pol.(policy.WorkloadAware)
	// Warnings about pods whose allocation record the ledger does not take as written go to
	// the pods' events, where their owners look.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent})
	c, err = cache.New(cache.Config{Nodes: nodes, Pods: pods, PodClient: client.CoreV1(), Resources: res, ReservationTTL: o.reservationTTL,
		UnrecordedGrace: o.unrecordedGrace, TrackWorkload: track, Recorder: recorder})
	if err != nil {
		broadcaster.Shutdown()
		return nil, nil, nil, err
	}
	return factory, c, broadcaster.Shutdown, nil
}

// await waits for the first of: a server failing, the cache stopping, the lease lost, ctx
// done; then it shuts the servers down (draining in-flight requests for --shutdown-timeout
// unless a server or the cache failed) and ends the election.
func await(ctx context.Context, o *options, servers []*endpoint, serveDone, cacheDone <-chan error, el election) error {
	select {
	case err := <-serveDone:
		shutdown(ctx, servers, 0)
		el.stop()
		return err
	case err := <-cacheDone:
		if ctx.Err() == nil {
			shutdown(ctx, servers, 0)
			el.stop()
			return fmt.Errorf("cache stopped: %w", err)
		}
	case err := <-el.lost:
		// The lease is lost: the verbs answer 503 already (Leading is false). Let binds in
		// flight finish, then exit non-zero; the restarted process rejoins as a follower.
		klog.ErrorS(err, "leader election lost; draining and exiting", "timeout", o.shutdownTimeout)
		return errors.Join(err, shutdown(ctx, servers, o.shutdownTimeout))
	case <-ctx.Done():
	}
	klog.InfoS("shutting down", "timeout", o.shutdownTimeout)
	err := shutdown(ctx, servers, o.shutdownTimeout)
	el.stop()
	return err
}

// restConfig is the client configuration of kubeconfig, in-cluster when it is empty.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (pass --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
