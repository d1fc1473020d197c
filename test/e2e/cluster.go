//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// realNodeLabel marks the kubelet-backed node (hack/lib/cluster.sh REAL_NODE_LABEL).
const realNodeLabel = "demo.gpushare.io/real-node"

// realNodeLock names the state dir owning the machine's single real node
// (hack/lib/cluster.sh REAL_NODE_LOCK).
const realNodeLock = "/run/gpushare-real-node"

// config is where the suite's cluster lives and how hack/cluster-up.sh is told so.
type config struct {
	repo   string
	state  string
	k8sBin string
	// scriptEnv is added to the environment of every hack/ script.
	scriptEnv               []string
	extenderPort            int
	extenderDiagnosticsPort int
	sharePluginPort         int
	pluginSchedulerPort     int
}

func configFromEnv() (*config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("finding the repository: %w", err)
	}
	repo := wd
	for {
		if _, err := os.Stat(filepath.Join(repo, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(repo)
		if parent == repo {
			return nil, fmt.Errorf("no go.mod above %s", wd)
		}
		repo = parent
	}
	state := os.Getenv("GPUSHARE_E2E_STATE_DIR")
	if state == "" {
		state = filepath.Join(repo, "_output", "e2e")
	}
	c := &config{repo: repo, state: state}
	ports, err := c.ports()
	if err != nil {
		return nil, err
	}
	hostPath, err := c.hostPath()
	if err != nil {
		return nil, err
	}
	c.scriptEnv = append(ports,
		"GPUSHARE_STATE_DIR="+state,
		// Only the host tools hack/lib/prereqs.sh declares: a script that calls anything else
		// (a ctr or kubectl of the machine's instead of the project's) fails here on any machine.
		"PATH="+hostPath,
		"GPUSHARE_KWOK_NODES=no", // each test makes the kwok nodes it needs
		// The extender's cases and gpushare-scheduler's run on one cluster: kube-scheduler with
		// the extender, and gpushare-scheduler beside it for pods that name it.
		"GPUSHARE_MODE=both",
	)
	return c, nil
}

// e2ePortBlock is the suite's block of ports in hack/lib/ports.sh, apart from the demo's so
// the two never talk to each other by mistake.
const e2ePortBlock = "e2e"

// ports reads the suite's ports from hack/lib/ports.sh (GPUSHARE_*_PORT=N lines), keeps the
// ones the tests dial and returns the lines for the scripts' environment.
func (c *config) ports() ([]string, error) {
	cmd := exec.Command("bash", "-c", `source "$1" && ports_env`, "ports", filepath.Join(c.repo, "hack", "lib", "ports.sh"))
	cmd.Env = append(os.Environ(), "GPUSHARE_PORT_BASE="+e2ePortBlock)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("reading the e2e ports from hack/lib/ports.sh: %w", err)
	}
	lines := strings.Fields(string(out))
	want := map[string]*int{
		"GPUSHARE_EXTENDER_PORT":             &c.extenderPort,
		"GPUSHARE_EXTENDER_DIAGNOSTICS_PORT": &c.extenderDiagnosticsPort,
		"GPUSHARE_SHARE_PLUGIN_METRICS_PORT": &c.sharePluginPort,
		"GPUSHARE_PLUGIN_SCHEDULER_PORT":     &c.pluginSchedulerPort,
	}
	for _, l := range lines {
		name, value, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("hack/lib/ports.sh: line %q is not NAME=PORT", l)
		}
		if p, ok := want[name]; ok {
			if *p, err = strconv.Atoi(value); err != nil {
				return nil, fmt.Errorf("hack/lib/ports.sh: %s: %w", name, err)
			}
			delete(want, name)
		}
	}
	for name := range want {
		return nil, fmt.Errorf("hack/lib/ports.sh prints no %s", name)
	}
	return append(lines, "GPUSHARE_PORT_BASE="+e2ePortBlock), nil
}

// hostPath makes a folder of links to the host tools hack/lib/prereqs.sh declares
// (hack/doctor.sh --link, which also says what is missing) and returns it: the PATH the
// suite runs the scripts with.
func (c *config) hostPath() (string, error) {
	dir := filepath.Join(c.state, "host-path")
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clearing %s: %w", dir, err)
	}
	cmd := exec.Command(filepath.Join(c.repo, "hack", "doctor.sh"), "--link", dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/doctor.sh --link %s: %w", dir, err)
	}
	return dir, nil
}

// script runs a hack/ script (or make) in the repository with the suite's environment,
// streaming its output to stderr, and returns its stdout's last line.
func (c *config) script(ctx context.Context, name string, args ...string) (string, error) {
	path := name
	if name != "make" {
		path = filepath.Join(c.repo, "hack", name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = c.repo
	cmd.Env = append(os.Environ(), c.scriptEnv...)
	if c.k8sBin != "" {
		cmd.Env = append(cmd.Env, "GPUSHARE_K8S_BIN="+c.k8sBin)
	}
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

// prepare stops a cluster that holds the real node (the demo, or a crashed earlier run),
// then builds the pinned Kubernetes binaries, our binaries and the test images.
//
// The real node (kubelet's ports, /var/lib/kubelet/device-plugins) exists once per machine,
// so a running `make demo` cluster is taken down rather than shared: tests must not depend on
// or disturb what a person left running, and reusing it would make results depend on it.
func prepare(c *config) error {
	ctx := context.Background()
	if b, err := os.ReadFile(realNodeLock); err == nil {
		owner := strings.TrimSpace(string(b))
		if owner != "" && owner != c.state {
			fmt.Fprintf(os.Stderr, "e2e: the real node is held by the cluster in %s (make demo?); stopping it\n", owner)
			cmd := exec.CommandContext(ctx, filepath.Join(c.repo, "hack", "cluster-down.sh"))
			cmd.Env = append(os.Environ(), "GPUSHARE_STATE_DIR="+owner)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("stopping the cluster in %s: %w", owner, err)
			}
		}
	}
	clusterDown(c) // leftovers of an earlier run that could not clean up
	bin, err := c.script(ctx, "build-k8s.sh")
	if err != nil {
		return err
	}
	c.k8sBin = bin
	// GPUSHARE_E2E_NO_BUILD=1 runs against bin/ as it is (iterating on the suite while
	// another component is mid-edit); CI always builds.
	if os.Getenv("GPUSHARE_E2E_NO_BUILD") != "1" {
		if _, err := c.script(ctx, "make", "build"); err != nil {
			return err
		}
	}
	if _, err := c.script(ctx, "build-images.sh"); err != nil {
		return err
	}
	return nil
}

func clusterDown(c *config) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.script(ctx, "cluster-down.sh"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cluster-down:", err)
	}
}

// reaper is a process outside the test binary that stops the cluster when the binary dies
// without running its deferred clean-up (panic, -timeout, SIGKILL).
type reaper struct{ cmd *exec.Cmd }

func startReaper(c *config) (*reaper, error) {
	if err := os.MkdirAll(filepath.Join(c.state, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", c.state, err)
	}
	logf, err := os.OpenFile(filepath.Join(c.state, "logs", "reaper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening reaper log: %w", err)
	}
	defer logf.Close()
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done; exec %q`,
		os.Getpid(), filepath.Join(c.repo, "hack", "cluster-down.sh"))
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), c.scriptEnv...)
	cmd.Env = append(cmd.Env, "GPUSHARE_K8S_BIN="+c.k8sBin)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the clean-up reaper: %w", err)
	}
	return &reaper{cmd: cmd}, nil
}

// stop ends the reaper once the suite cleaned up itself.
func (r *reaper) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
}

// dumpLogs prints the tail of every component log, for CI failures.
func dumpLogs(c *config) {
	logs, _ := filepath.Glob(filepath.Join(c.state, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(string(b), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(os.Stderr, "\n===== %s (last 40 lines)\n%s\n", l, strings.Join(lines, "\n"))
	}
}

// Env is the running cluster as tests see it.
type Env struct {
	cfg        *config
	Kubeconfig string
	Rest       *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Mapper     *restmapper.DeferredDiscoveryRESTMapper
	// ExtenderURL is where the scheduler verbs are served:
	// https://127.0.0.1:<port>/gpushare-scheduler (mutual TLS).
	ExtenderURL string
	// ExtenderDiagnosticsURL is the base of the extender's diagnostics listener
	// (https://127.0.0.1:<port>): /metrics, /readyz, /gpushare-scheduler/inspect.
	ExtenderDiagnosticsURL string
	// ExtenderPKI is the folder of the extender's CA and certificates (hack/lib/certs.sh):
	// ca.crt, client.crt/.key (tools), scheduler.crt/.key, extender.crt/.key.
	ExtenderPKI string
	// ExtenderHTTP trusts the extender's CA and presents the tools' client certificate.
	ExtenderHTTP *http.Client
	// PluginSchedulerURL is gpushare-scheduler's secure port (https://127.0.0.1:<port>):
	// /metrics, /readyz; the cluster admin's credentials are authorized there.
	PluginSchedulerURL string
	// SharePluginURL is the real node's share-plugin metrics address (http://127.0.0.1:<port>).
	SharePluginURL string
	// RealNode is the kubelet-backed node's name; empty in the kwok-only variant.
	RealNode string
	// NoRealNodeWhy says why there is no real node.
	NoRealNodeWhy string
}

func clusterUp(c *config) (*Env, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.script(ctx, "cluster-up.sh"); err != nil {
		return nil, err
	}
	e := &Env{
		cfg:                    c,
		Kubeconfig:             filepath.Join(c.state, "kubeconfig"),
		ExtenderURL:            fmt.Sprintf("https://127.0.0.1:%d/gpushare-scheduler", c.extenderPort),
		ExtenderDiagnosticsURL: fmt.Sprintf("https://127.0.0.1:%d", c.extenderDiagnosticsPort),
		ExtenderPKI:            filepath.Join(c.state, "pki", "extender"),
		SharePluginURL:         fmt.Sprintf("http://127.0.0.1:%d", c.sharePluginPort),
		PluginSchedulerURL:     fmt.Sprintf("https://127.0.0.1:%d", c.pluginSchedulerPort),
	}
	var err error
	if e.ExtenderHTTP, err = e.extenderClient(true); err != nil {
		return nil, err
	}
	if e.Rest, err = clientcmd.BuildConfigFromFlags("", e.Kubeconfig); err != nil {
		return nil, fmt.Errorf("loading %s: %w", e.Kubeconfig, err)
	}
	e.Rest.QPS, e.Rest.Burst = 50, 100
	if e.Client, err = kubernetes.NewForConfig(e.Rest); err != nil {
		return nil, fmt.Errorf("building client: %w", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Rest); err != nil {
		return nil, fmt.Errorf("building dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(e.Rest)
	if err != nil {
		return nil, fmt.Errorf("building discovery client: %w", err)
	}
	e.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	mode, err := os.ReadFile(filepath.Join(c.state, "node-mode"))
	if err != nil {
		return nil, fmt.Errorf("reading node mode: %w", err)
	}
	if strings.TrimSpace(string(mode)) != "real" {
		e.NoRealNodeWhy = "the cluster runs the kwok-only variant (no root or no containerd; see cluster-up's output)"
		return e, nil
	}
	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1ListOptions(realNodeLabel+"=true"))
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if n.Annotations[kwokAnnotation] == "" {
			e.RealNode = n.Name
		}
	}
	if e.RealNode == "" {
		return nil, errors.New("node mode is real but no node carries " + realNodeLabel)
	}
	return e, nil
}

// Bin is the path of one of our binaries (make build).
func (e *Env) Bin(name string) string { return filepath.Join(e.cfg.repo, "bin", name) }

// Repo is the repository root.
func (e *Env) Repo() string { return e.cfg.repo }

// ExtenderPID is the extender's PID as hack/cluster-up.sh recorded it.
func (e *Env) ExtenderPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(e.cfg.state, "pids", "extender"))
	if err != nil {
		return 0, fmt.Errorf("reading the extender's pid file: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// StartComponent starts one component through hack/cluster-up.sh when it is not running;
// extraEnv (KEY=value) is added to the script's environment.
func (e *Env) StartComponent(ctx context.Context, name string, extraEnv ...string) error {
	c := *e.cfg
	c.scriptEnv = append(append([]string(nil), c.scriptEnv...), extraEnv...)
	_, err := c.script(ctx, "cluster-up.sh", name)
	return err
}

// RestartComponent stops one component (SIGTERM, by its recorded PID) and starts it again
// with extraEnv.
func (e *Env) RestartComponent(ctx context.Context, name string, extraEnv ...string) error {
	if err := e.StopComponent(ctx, name); err != nil {
		return err
	}
	return e.StartComponent(ctx, name, extraEnv...)
}

// StopComponent stops one component (SIGTERM, by its recorded PID) and waits up to 15 s for
// it to exit.
func (e *Env) StopComponent(_ context.Context, name string) error {
	b, err := os.ReadFile(filepath.Join(e.cfg.state, "pids", name))
	if err != nil {
		return fmt.Errorf("reading %s's pid file: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s's pid file: %w", name, err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
	}
	if !exited(pid, 15*time.Second) {
		return fmt.Errorf("%s (pid %d) still runs 15s after SIGTERM", name, pid)
	}
	return nil
}

// exited waits up to d for process pid to end (a zombie counts as ended: its exe link is
// gone) and reports whether it did.
func exited(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// extenderClient is an HTTP client that trusts the extender's CA and, withCert, presents the
// tools' client certificate (hack/lib/certs.sh).
func (e *Env) extenderClient(withCert bool) (*http.Client, error) {
	files := transport.TLSConfig{CAFile: filepath.Join(e.ExtenderPKI, "ca.crt")}
	if withCert {
		files.CertFile, files.KeyFile = filepath.Join(e.ExtenderPKI, "client.crt"), filepath.Join(e.ExtenderPKI, "client.key")
	}
	cfg, err := transport.TLSConfigFor(&transport.Config{TLS: files})
	if err != nil {
		return nil, fmt.Errorf("loading the extender's certificates from %s: %w", e.ExtenderPKI, err)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// extenderCheckArgs are kubectl inspect gpushare --check's flags reaching this extender.
func (e *Env) extenderCheckArgs() []string {
	return []string{"--extender-url", e.ExtenderDiagnosticsURL,
		"--extender-client-cert", filepath.Join(e.ExtenderPKI, "client.crt"),
		"--extender-client-key", filepath.Join(e.ExtenderPKI, "client.key"),
		"--extender-ca", filepath.Join(e.ExtenderPKI, "ca.crt")}
}
