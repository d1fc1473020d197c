// Command extender is the gpushare kube-scheduler extender: it filters, scores and binds
// pods requesting gpu-mem card by card and serves inspect, health and metrics endpoints.
// main only wires flags, clients and informers to pkg/cache and pkg/routes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/leader"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
	"github.com/gpushare/gpushare/pkg/serving"
)

// eventComponent is the source of the events the extender records.
const eventComponent = "gpushare-extender"

// options are the command-line flags; each also reads GPUSHARE_<FLAG> (see flagSet).
type options struct {
	kubeconfig      string
	bindAddress     string
	port            int
	diagnosticsPort int
	tlsCertFile     string
	tlsKeyFile      string
	clientCAFile    string
	// clientNames are the client certificate names the verbs listener admits.
	clientNames     []string
	insecureHTTP    bool
	policy          string
	nodeSelector    string
	memResource     string
	countResource   string
	reservationTTL  time.Duration
	unrecordedGrace time.Duration
	maxRequestBytes int64
	qps             float32
	burst           int
	shutdownTimeout time.Duration
	profiling       bool
	leaderElect     bool
	// Lease and timing of --leader-elect (Client and Identity are filled in by run).
	leaderElection leader.Config
	// podName/podNamespace name the extender's own pod, which carries the leader label.
	podName, podNamespace string

	// What bind accepts and how much one client can hold (routes.Config, routes.Timeouts).
	schedulerNames     []string
	bindNonGPUPods     bool
	maxNodesPerRequest int
	maxInflight        int
	podGetQPS          float64
	podGetBurst        int
	timeouts           routes.Timeouts
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	def := gpushare.DefaultResources()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty means in-cluster config")
	fs.StringVar(&o.bindAddress, "bind-address", "", "IP both listeners bind; empty means "+serving.DefaultSecureBindAddress+
		" with TLS and "+serving.DefaultInsecureBindAddress+" with --insecure-serve-http")
	fs.IntVar(&o.port, "port", 12345, "port of the scheduler verbs (filter, prioritize, bind)")
	fs.IntVar(&o.diagnosticsPort, "diagnostics-port", 12346, "port of /metrics, /healthz, /readyz, /version, /gpushare-scheduler/inspect and, with --profiling, /debug/pprof/")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "PEM serving certificate (chain) of both listeners; re-read when it changes")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file; re-read when it changes")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "PEM CA bundle that client certificates must chain to (the scheduler's, monitoring's); re-read when it changes")
	fs.StringSliceVar(&o.clientNames, "client-allowed-names", []string{serving.DefaultClientAllowedName}, "client certificate names "+
		"(common name, DNS or URI SAN) the scheduler verbs admit, repeat the flag or separate by commas; other certificates of --client-ca-file "+
		"(monitoring's, inspect's) get 403 there and reach only the diagnostics port")
	fs.BoolVar(&o.insecureHTTP, "insecure-serve-http", false, "serve plain HTTP without any authentication instead of TLS (local demo, loopback-only deployments)")
	fs.StringVar(&o.policy, "policy", policy.Default, "placement policy, one of: "+strings.Join(policy.Names(), ", "))
	fs.StringVar(&o.nodeSelector, "node-selector", gpushare.NodeLabelKey+"="+gpushare.NodeLabelValue, "label selector of GPU-sharing nodes")
	fs.StringVar(&o.memResource, "mem-resource", string(def.Mem), "extended resource pods request GPU memory units with")
	fs.StringVar(&o.countResource, "count-resource", string(def.Count), "extended resource giving the GPU count (node) or cards per container (pod)")
	fs.DurationVar(&o.reservationTTL, "reservation-ttl", cache.DefaultReservationTTL, "how long cards reserved at bind wait for the pod to show up bound before expiry asks the API server whether it is")
	fs.DurationVar(&o.unrecordedGrace, "unrecorded-grace", cache.DefaultUnrecordedGrace, "how long a placed pod without a valid allocation record "+
		"(created with spec.nodeName, say) counts on every card of its node before it counts against the node's free units as a whole, with a Warning event")
	fs.Int64Var(&o.maxRequestBytes, "max-request-bytes", routes.DefaultMaxRequestBytes, "largest accepted request body in bytes, "+
		"larger ones are answered 400 (a filter call naming 15,000 nodes is about 200 KB; a scheduler sending full Node objects, "+
		"without nodeCacheCapable, is not supported beyond this)")
	fs.StringSliceVar(&o.schedulerNames, "scheduler-name", []string{routes.DefaultSchedulerName}, "spec.schedulerName of the pods bind accepts "+
		"(repeat the flag or separate by commas for several); bind refuses pods of other schedulers")
	fs.BoolVar(&o.bindNonGPUPods, "bind-non-gpu-pods", false, "also bind pods that request no gpu-mem (refused otherwise); needed only "+
		"when the scheduler's extender entry has bindVerb but no managedResources, since kube-scheduler then hands every pod to the extender's bind")
	fs.IntVar(&o.maxNodesPerRequest, "max-nodes-per-request", routes.DefaultMaxNodesPerRequest, "most nodes a filter or prioritize call may list; more are answered 400")
	fs.IntVar(&o.maxInflight, "max-inflight", routes.DefaultMaxInflight, "most filter, prioritize, bind and inspect requests served at once; more are answered 429 with Retry-After")
	fs.Float64Var(&o.podGetQPS, "pod-get-qps", routes.DefaultPodGetQPS, "API reads per second of pods a bind names that the informer does not hold yet; "+
		"binds beyond the rate fail at once")
	fs.IntVar(&o.podGetBurst, "pod-get-burst", routes.DefaultPodGetBurst, "burst of --pod-get-qps")
	to := routes.DefaultTimeouts()
	fs.DurationVar(&o.timeouts.ReadHeader, "read-header-timeout", to.ReadHeader, "longest time to read a request's headers")
	fs.DurationVar(&o.timeouts.Read, "read-timeout", to.Read, "longest time to read a whole request, body included")
	fs.DurationVar(&o.timeouts.Write, "write-timeout", to.Write, "longest time from a request's headers to the end of its answer; "+
		"must exceed 1m, a bind's Binding write and its read-back (30s each)")
	fs.DurationVar(&o.timeouts.Idle, "idle-timeout", to.Idle, "longest time a keep-alive connection waits for its next request "+
		"(keep it above the scheduler's 90s idle-connection timeout)")
	fs.Float32Var(&o.qps, "kube-api-qps", 100, "API client queries per second (binds must not be throttled)")
	fs.IntVar(&o.burst, "kube-api-burst", 200, "API client burst")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long SIGTERM waits for in-flight requests")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "run as one of several replicas: only the replica holding the Lease "+
		"--leader-elect-resource-namespace/--leader-elect-resource-name answers filter, prioritize and bind and reports ready; "+
		"the others keep a warm cache and answer those verbs 503")
	fs.DurationVar(&o.leaderElection.LeaseDuration, "leader-elect-lease-duration", leader.DefaultLeaseDuration,
		"how long followers wait after the leader's last renewal before taking the lease: the longest failover after a leader dies")
	fs.DurationVar(&o.leaderElection.RenewDeadline, "leader-elect-renew-deadline", leader.DefaultRenewDeadline,
		"how long the leader retries renewing before it stops answering the verbs and exits; below --leader-elect-lease-duration")
	fs.DurationVar(&o.leaderElection.RetryPeriod, "leader-elect-retry-period", leader.DefaultRetryPeriod,
		"wait between attempts to acquire or renew the lease")
	fs.StringVar(&o.leaderElection.Namespace, "leader-elect-resource-namespace", leader.DefaultNamespace, "namespace of the leader election Lease")
	fs.StringVar(&o.leaderElection.Name, "leader-elect-resource-name", leader.DefaultName, "name of the leader election Lease")
	fs.StringVar(&o.podName, "pod-name", "", "with --leader-elect: this replica's pod, labelled "+gpushare.LabelExtenderLeader+
		"=true while it leads so that the Service selecting that label reaches the leader (the Deployment sets it from metadata.name); empty: no label")
	fs.StringVar(&o.podNamespace, "pod-namespace", "", "namespace of --pod-name (the Deployment sets it from metadata.namespace)")
	fs.BoolVar(&o.profiling, "profiling", false, "serve Go's pprof profiles under /debug/pprof/ on the diagnostics port, behind its client-certificate check (benchmarks, debugging)")
}

// flagSet holds the options' flags, each bound to its environment variable GPUSHARE_<FLAG>
// (internal/flagenv), then klog's, which read no environment variable.
func flagSet(o *options, h pflag.ErrorHandling) *pflag.FlagSet {
	fs := pflag.NewFlagSet("extender", h)
	o.addFlags(fs)
	flagenv.Bind(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return fs
}

func (o *options) validate() (policy.Policy, gpushare.Resources, labels.Selector, error) {
	res := gpushare.Resources{Mem: corev1.ResourceName(o.memResource), Count: corev1.ResourceName(o.countResource)}
	if err := res.Validate(); err != nil {
		return nil, res, nil, err
	}
	pol, err := policy.New(o.policy)
	if err != nil {
		return nil, res, nil, err
	}
	sel, err := labels.Parse(o.nodeSelector)
	if err != nil {
		return nil, res, nil, fmt.Errorf("--node-selector %q: %w", o.nodeSelector, err)
	}
	if err := o.servingOptions().Validate(); err != nil {
		return nil, res, nil, err
	}
	switch {
	case o.port < 1 || o.port > 65535:
		return nil, res, nil, fmt.Errorf("--port %d out of range", o.port)
	case o.diagnosticsPort < 1 || o.diagnosticsPort > 65535:
		return nil, res, nil, fmt.Errorf("--diagnostics-port %d out of range", o.diagnosticsPort)
	case o.diagnosticsPort == o.port:
		return nil, res, nil, fmt.Errorf("--diagnostics-port %d must differ from --port", o.diagnosticsPort)
	case o.reservationTTL <= 0:
		return nil, res, nil, fmt.Errorf("--reservation-ttl %s must be positive", o.reservationTTL)
	case o.unrecordedGrace <= 0:
		return nil, res, nil, fmt.Errorf("--unrecorded-grace %s must be positive", o.unrecordedGrace)
	case o.maxRequestBytes <= 0:
		return nil, res, nil, fmt.Errorf("--max-request-bytes %d must be positive", o.maxRequestBytes)
	case o.maxNodesPerRequest <= 0 || o.maxInflight <= 0 || o.podGetQPS <= 0 || o.podGetBurst <= 0:
		return nil, res, nil, fmt.Errorf("--max-nodes-per-request %d, --max-inflight %d, --pod-get-qps %g and --pod-get-burst %d must be positive",
			o.maxNodesPerRequest, o.maxInflight, o.podGetQPS, o.podGetBurst)
	case slices.Contains(o.schedulerNames, "") || len(o.schedulerNames) == 0:
		return nil, res, nil, fmt.Errorf("--scheduler-name %q: names must not be empty", strings.Join(o.schedulerNames, ","))
	}
	if err := o.timeouts.Validate(); err != nil {
		return nil, res, nil, fmt.Errorf("--read-header-timeout, --read-timeout, --write-timeout, --idle-timeout: %w", err)
	}
	if o.podName != "" && o.podNamespace == "" {
		return nil, res, nil, errors.New("--pod-name needs --pod-namespace")
	}
	if o.leaderElect {
		if err := o.leaderElection.Validate(); err != nil {
			return nil, res, nil, err
		}
	}
	return pol, res, sel, nil
}

func (o *options) servingOptions() serving.Options {
	return serving.Options{BindAddress: o.bindAddress, CertFile: o.tlsCertFile, KeyFile: o.tlsKeyFile,
		ClientCAFile: o.clientCAFile, ClientAllowedNames: o.clientNames, Insecure: o.insecureHTTP}
}

func main() {
	var o options
	fs := flagSet(&o, pflag.ExitOnError)
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintf(os.Stderr, "extender: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &o); err != nil {
		klog.ErrorS(err, "extender failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
