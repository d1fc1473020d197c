package inspect

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/version"
)

// flagpole holds the command's own flags (kubectl's connection flags live in
// genericclioptions.ConfigFlags).
type flagpole struct {
	Details       bool
	Output        string
	Pending       bool
	MemResource   string
	CountResource string

	Check             bool
	ExtenderURL       string
	ExtenderNamespace string
	ExtenderService   string
	// The client certificate, key and CA for --extender-url (the extender's diagnostics
	// listener asks for mutual TLS).
	ExtenderClientCert string
	ExtenderClientKey  string
	ExtenderCA         string
	SharePluginURLs    []string

	Verify        bool
	ProbeImage    string
	VerifyTimeout time.Duration
}

// cluster is what the command needs from the connection flags: a client, and the
// namespace given with -n ("" when not given).
type cluster struct {
	Client    kubernetes.Interface
	Namespace string
	// Logs reads a container's log (apiLogs; a seam for tests).
	Logs logReader
}

// connectFunc builds the cluster connection; a seam so tests can pass a fake clientset.
type connectFunc func() (cluster, error)

const example = `  # GPU memory per card of every GPU-sharing node, and the cluster total
  kubectl inspect gpushare

  # Each pod's units on each card
  kubectl inspect gpushare -d

  # One node, machine-readable
  kubectl inspect gpushare node-1 -o json

  # Pods waiting for gpu-mem, with the scheduler's last reason
  kubectl inspect gpushare --pending -n team-a

  # Do the pods' annotations, the extender's ledger and share-plugin agree? (exit 1 if not)
  kubectl inspect gpushare --check

  # Does each GPU node isolate its pods as its labels promise? One probe pod per node
  # (exit 1 if a node is NOT enforced, 2 if one cannot be verified)
  kubectl inspect gpushare --verify -n gpushare-verify`

// NewCommand returns the `kubectl inspect gpushare [NODE]` command with kubectl's connection
// flags (--kubeconfig, --context, -n, --server, …). It writes results to streams.Out and
// warnings to streams.ErrOut, and returns an error (for main to print on one line and exit
// with ExitCode) when the cluster cannot be reached, access is denied, no GPU-sharing node
// exists, NODE is unknown, or --check finds a disagreement or cannot read a view it was
// told to read.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	config := genericclioptions.NewConfigFlags(true)
	cmd := newCommand(streams, func() (cluster, error) {
		rc, err := config.ToRESTConfig()
		if err != nil {
			return cluster{}, err
		}
		rc.UserAgent = "kubectl-inspect-gpushare/" + version.Version
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return cluster{}, fmt.Errorf("building the API client: %w", err)
		}
		return cluster{Client: cs, Namespace: *config.Namespace, Logs: apiLogs(cs)}, nil
	})
	config.AddFlags(cmd.PersistentFlags())
	return cmd
}

func newCommand(streams genericiooptions.IOStreams, connect connectFunc) *cobra.Command {
	def := gpushare.DefaultResources()
	flags := &flagpole{}
	cmd := &cobra.Command{
		Use: "kubectl-inspect-gpushare [NODE] | --verify [NODE...]",
		// kubectl runs the plugin as `kubectl inspect gpushare`; help and usage say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl inspect gpushare"},
		Short:       "Show GPU memory allocated per card on GPU-sharing nodes",
		Long: `Show the gpu-mem units allocated on each card of the GPU-sharing nodes (label cgpu=true,
share-plugin's inventory annotation, or allocatable gpu-mem), read from the same node and
pod annotations the gpushare scheduler extender uses. Pods bound to a node but not yet
given a card count under PENDING(Allocated). With --pending, list the pods still waiting
for gpu-mem and the scheduler's last reason. With --check, compare the pods' annotations
with the extender's ledger and with the cards share-plugin served, print one line per
disagreement, and exit 1 when there is any (2 when the check could not run). With --verify
[NODE...], run gpushare-probe in one pod per GPU-sharing node, placed by the scheduler with
one gpu-mem unit and a sibling container with none, print a table of what each container
saw against what the node's isolation label promises, delete the pods, and exit 1 when a
node is NOT enforced (2 when one could not be verified).`,
		Example: example,
		Args: func(cmd *cobra.Command, args []string) error {
			if flags.Verify {
				return nil
			}
			return cobra.MaximumNArgs(1)(cmd, args)
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
		RunE: func(cmd *cobra.Command, args []string) error {
			if flags.Verify {
				return runVerifyE(cmd.Context(), flags, args, connect, streams)
			}
			node := ""
			if len(args) == 1 {
				node = args[0]
			}
			return runE(cmd.Context(), flags, node, connect, streams)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&flags.Details, "details", "d", false, "show each pod's units on each card")
	f.StringVarP(&flags.Output, "output", "o", "", "output format: json or yaml (default: the table)")
	f.BoolVar(&flags.Pending, "pending", false, "list pods waiting for gpu-mem with their last FailedScheduling reason")
	f.StringVar(&flags.MemResource, "mem-resource", string(def.Mem), "extended resource of GPU memory units")
	f.StringVar(&flags.CountResource, "count-resource", string(def.Count), "extended resource of the GPU count")
	f.BoolVar(&flags.Check, "check", false, "compare the pods' annotations, the extender's ledger and share-plugin's served cards; exit 1 on any disagreement")
	f.StringVar(&flags.ExtenderURL, "extender-url", "", "with --check: base URL of the extender's diagnostics listener, e.g. https://127.0.0.1:12346 (default: through the API server's service proxy)")
	f.StringVar(&flags.ExtenderClientCert, "extender-client-cert", "", "with --extender-url: client certificate (PEM) signed by the extender's client CA")
	f.StringVar(&flags.ExtenderClientKey, "extender-client-key", "", "with --extender-url: key of --extender-client-cert")
	f.StringVar(&flags.ExtenderCA, "extender-ca", "", "with --extender-url: CA bundle (PEM) that verifies the extender's serving certificate")
	f.StringVar(&flags.ExtenderNamespace, "extender-namespace", defaultExtenderNamespace, "with --check: namespace of the extender's service")
	f.StringVar(&flags.ExtenderService, "extender-service", defaultExtenderService, "with --check: name of the extender's service (port named "+extenderServicePort+")")
	f.StringSliceVar(&flags.SharePluginURLs, "share-plugin-urls", nil, "with --check: share-plugin base URLs, comma separated (default: each share-plugin pod through the API server's pod proxy)")
	f.BoolVar(&flags.Verify, "verify", false, "run gpushare-probe in a pod on each GPU-sharing node (or each NODE given) and print whether its isolation holds; exit 1 if a node's is NOT enforced, 2 if one cannot be verified")
	f.StringVar(&flags.ProbeImage, "probe-image", defaultProbeImage, "with --verify: image holding "+probeBinary+" (the share-plugin image)")
	f.DurationVar(&flags.VerifyTimeout, "verify-timeout", 3*time.Minute, "with --verify: how long to wait for the probe pods to finish")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if flags.Check || flags.Verify {
			return exitError{code: exitCheckIncomplete, err: err}
		}
		return err
	})
	return cmd
}

func (f *flagpole) validate(node string) error {
	switch f.Output {
	case "", "json", "yaml":
	default:
		return fmt.Errorf("--output %q: want json or yaml", f.Output)
	}
	if f.Pending && (node != "" || f.Details) {
		return fmt.Errorf("--pending lists unscheduled pods: it takes neither NODE nor -d")
	}
	if f.Verify {
		if f.Check || f.Pending || f.Details {
			return fmt.Errorf("--verify runs probe pods: it takes neither --check, --pending nor -d")
		}
		if f.ProbeImage == "" || f.VerifyTimeout <= 0 {
			return fmt.Errorf("--verify needs a --probe-image and a positive --verify-timeout")
		}
	}
	if f.Check {
		if f.Pending || f.Details {
			return fmt.Errorf("--check compares the views of occupancy: it takes neither --pending nor -d")
		}
		for _, u := range append([]string{f.ExtenderURL}, f.SharePluginURLs...) {
			if err := validateBaseURL(u); err != nil {
				return err
			}
		}
		if f.ExtenderURL == "" && (f.ExtenderNamespace == "" || f.ExtenderService == "") {
			return fmt.Errorf("--extender-namespace and --extender-service must not be empty without --extender-url")
		}
		if f.ExtenderURL == "" && (f.ExtenderClientCert != "" || f.ExtenderClientKey != "" || f.ExtenderCA != "") {
			return fmt.Errorf("--extender-client-cert, --extender-client-key and --extender-ca apply to --extender-url only (the API server's proxy presents no client certificate)")
		}
		if (f.ExtenderClientCert == "") != (f.ExtenderClientKey == "") {
			return fmt.Errorf("--extender-client-cert and --extender-client-key go together")
		}
	}
	return f.resources().Validate()
}

func (f *flagpole) resources() gpushare.Resources {
	return gpushare.Resources{Mem: corev1.ResourceName(f.MemResource), Count: corev1.ResourceName(f.CountResource)}
}

func runE(ctx context.Context, flags *flagpole, node string, connect connectFunc, streams genericiooptions.IOStreams) error {
	if err := flags.validate(node); err != nil {
		return checkIncomplete(flags, err)
	}
	c, err := connect()
	if err != nil {
		return checkIncomplete(flags, explain(err))
	}
	if flags.Check {
		return runCheck(ctx, flags, node, c, streams)
	}
	if flags.Pending {
		m, err := fetchPending(ctx, c, flags.resources())
		if err != nil {
			return explain(err)
		}
		return render(streams.Out, flags, m, renderPending)
	}
	m, err := fetchModel(ctx, c.Client, node, flags.resources())
	if err != nil {
		return explain(err)
	}
	for _, n := range m.Nodes {
		for _, w := range n.Warnings {
			fmt.Fprintf(streams.ErrOut, "warning: %s\n", w)
		}
	}
	text := renderSummary
	if flags.Details {
		text = renderDetails
	}
	return render(streams.Out, flags, m, text)
}

// runVerifyE connects and runs --verify in the namespace of -n (default "default").
func runVerifyE(ctx context.Context, flags *flagpole, nodes []string, connect connectFunc, streams genericiooptions.IOStreams) error {
	if err := flags.validate(""); err != nil {
		return checkIncomplete(flags, err)
	}
	c, err := connect()
	if err != nil {
		return checkIncomplete(flags, explain(err))
	}
	ns := c.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	if c.Logs == nil {
		c.Logs = apiLogs(c.Client)
	}
	r := verifyRun{Client: c, Namespace: ns, Image: flags.ProbeImage, Mem: flags.resources().Mem,
		ID: utilrand.String(5), Timeout: flags.VerifyTimeout, Interval: time.Second}
	return runVerify(ctx, flags, nodes, r, streams)
}

// render writes m in the -o format, or as text.
func render[M any](w io.Writer, flags *flagpole, m M, text func(io.Writer, M) error) error {
	switch flags.Output {
	case "json":
		return writeJSON(w, m)
	case "yaml":
		return writeYAML(w, m)
	}
	return text(w, m)
}

// validateBaseURL accepts "" or an http(s) URL with a host.
func validateBaseURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL with a host (e.g. http://127.0.0.1:12345)", s)
	}
	return nil
}
