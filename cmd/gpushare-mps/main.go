// Command gpushare-mps runs the NVIDIA MPS control daemons of a node labelled
// gpushare.io/isolation=mps: one per card and distinct cap, each holding its clients to that
// cap on the server side, started and stopped as share-plugin's want files under the MPS root
// ask (pkg/mps). It runs in deploy/mps's DaemonSet, next to the driver's
// nvidia-cuda-mps-control, and needs CAP_SYS_ADMIN (a mount namespace per daemon, a tmpfs per
// daemon's /dev/shm). See docs/isolation.md.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/mps"
	"github.com/gpushare/gpushare/pkg/version"
)

type options struct {
	root         string
	control      string
	shmSize      string
	readyTimeout time.Duration
	interval     time.Duration
	retryAfter   time.Duration
	stopTimeout  time.Duration
	metrics      string
	showVersion  bool
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.root, "root", gpushare.DefaultMPSRoot, "the MPS root: share-plugin's --mps-root, the same host folder at the same path")
	fs.StringVar(&o.control, "control", "nvidia-cuda-mps-control", "NVIDIA's MPS control program (path or name in PATH; the NVIDIA container runtime mounts the driver's)")
	fs.StringVar(&o.shmSize, "shm-size", "64Mi", "size of each daemon's /dev/shm tmpfs, shared with its clients (a Kubernetes quantity); 0: a plain folder")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 30*time.Second, "how long a new control daemon may take to answer")
	fs.DurationVar(&o.interval, "interval", 500*time.Millisecond, "how often the MPS root is read for share-plugin's wants")
	fs.DurationVar(&o.retryAfter, "retry-after", 10*time.Second, "how long a daemon that failed to start waits before the next try")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 10*time.Second, "how long a daemon told to quit may take before it is killed")
	fs.StringVar(&o.metrics, "metrics-address", ":9402", "address of /metrics and /healthz; empty disables")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
}

func main() {
	// The launcher re-executes itself to put each daemon in a mount namespace of its own.
	if len(os.Args) > 3 && os.Args[1] == mps.ExecDaemonCommand && os.Args[3] == "--" {
		err := mps.ExecDaemon(os.Args[2], os.Args[4:])
		fmt.Fprintf(os.Stderr, "gpushare-mps: %v\n", err)
		os.Exit(1)
	}
	if len(os.Args) == 3 && os.Args[1] == "install" {
		install(os.Args[2])
		return
	}
	var o options
	fs := pflag.NewFlagSet("gpushare-mps", pflag.ExitOnError)
	o.addFlags(fs)
	flagenv.Bind(fs, flagenv.Except("version"))
	kfs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(kfs)
	fs.AddGoFlagSet(kfs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintf(os.Stderr, "gpushare-mps: %v\n", err)
		os.Exit(2)
	}
	if o.showVersion {
		fmt.Println(version.Version)
		return
	}
	if err := run(o); err != nil {
		klog.ErrorS(err, "gpushare-mps failed")
		klog.Flush()
		os.Exit(1)
	}
}

// install copies this program into dir (deploy/mps's init container: the share-plugin image
// has it, the CUDA base image that runs it does not, and neither has a shell to copy it).
func install(dir string) {
	self, err := os.Executable()
	if err == nil {
		var path string
		if path, err = limithook.InstallAs(self, dir, "gpushare-mps"); err == nil {
			fmt.Println("installed", path)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "gpushare-mps: install: %v\n", err)
	os.Exit(1)
}

func run(o options) error {
	shm, err := resource.ParseQuantity(o.shmSize)
	if err != nil || shm.Sign() < 0 {
		return fmt.Errorf("--shm-size %q: want a non-negative quantity such as 64Mi", o.shmSize)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program for its exec-daemon subcommand: %w", err)
	}
	l, err := mps.NewLauncher(mps.Config{Root: o.root, ShmSize: shm.Value(), ReadyTimeout: o.readyTimeout,
		Interval: o.interval, RetryAfter: o.retryAfter, StopTimeout: o.stopTimeout},
		mps.ExecControl{Binary: o.control, Self: self}, clock.RealClock{})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.root, 0o755); err != nil {
		return fmt.Errorf("creating the MPS root: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	klog.InfoS("gpushare-mps starting", "version", version.Version)
	if o.metrics != "" {
		srv := &http.Server{Addr: o.metrics, Handler: l.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Serving /metrics failed", "address", o.metrics)
				stop()
			}
		}()
		defer srv.Close()
	}
	l.Run(ctx)
	klog.InfoS("gpushare-mps stopped")
	return nil
}
