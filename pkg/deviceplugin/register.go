package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// socketName is the plugin's socket in the device-plugin folder (the old plugin's name).
const socketName = "aliyungpushare.sock"

func (p *Plugin) socketPath() string  { return filepath.Join(p.cfg.PluginDir, socketName) }
func (p *Plugin) kubeletPath() string { return filepath.Join(p.cfg.PluginDir, "kubelet.sock") }

// socketCheck is how often serve re-checks that both sockets still exist, a fallback for
// missed fsnotify events.
const socketCheck = 5 * time.Second

// serveAndRegister serves the plugin on its socket and registers with kubelet, again each
// time kubelet.sock is re-created (a kubelet restart wipes the folder and forgets plugins)
// or our socket disappears. Returns when ctx is done.
func (p *Plugin) serveAndRegister(ctx context.Context) error {
	if err := os.MkdirAll(p.cfg.PluginDir, 0o750); err != nil {
		return fmt.Errorf("creating device plugin folder: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", p.cfg.PluginDir, err)
	}
	defer w.Close()
	if err := w.Add(p.cfg.PluginDir); err != nil {
		return fmt.Errorf("watching %s: %w", p.cfg.PluginDir, err)
	}
	var srv *grpc.Server
	defer func() {
		if srv != nil {
			srv.Stop()
		}
	}()
	srv = p.ensureServing(ctx, srv)
	p.watchFolder(ctx, w.Events, w.Errors, func() { srv = p.ensureServing(ctx, srv) })
	return nil
}

// watchFolder calls ensure once a burst of plugin-folder events (events, errs) that may
// mean kubelet forgot the plugin has settled (settleDelay), and when a socketCheck finds a
// socket missing or the plugin unregistered, until ctx is done. Timers run on the
// configured clock.
func (p *Plugin) watchFolder(ctx context.Context, events <-chan fsnotify.Event, errs <-chan error, ensure func()) {
	tick := p.node.Clock().NewTicker(socketCheck)
	defer tick.Stop()
	var settle <-chan time.Time
	soon := func() {
		if settle == nil {
			settle = p.node.Clock().After(settleDelay)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			switch {
			case ev.Name == p.kubeletPath() && ev.Has(fsnotify.Create):
				klog.InfoS("kubelet.sock created; registering again", "path", ev.Name)
				p.setRegistered(false)
				soon()
			case ev.Name == p.socketPath() && ev.Has(fsnotify.Remove):
				p.setRegistered(false)
				soon()
			}
		case err := <-errs:
			klog.ErrorS(err, "Watching device plugin folder")
		case <-tick.C():
			if !fileExists(p.socketPath()) || !p.registered() {
				soon()
			}
		case <-settle:
			settle = nil
			ensure()
		}
	}
}

// settleDelay lets a burst of folder events (kubelet wiping the folder, then creating its
// socket) end before the plugin reacts once.
const settleDelay = 100 * time.Millisecond

// ensureServing serves on a fresh socket when ours is gone (kubelet wiped the folder) and
// registers when kubelet.sock exists and we are not registered. It returns the server now
// serving (nil when serving failed; the next check retries).
func (p *Plugin) ensureServing(ctx context.Context, srv *grpc.Server) *grpc.Server {
	if srv == nil || !fileExists(p.socketPath()) {
		if srv != nil {
			srv.Stop()
		}
		var err error
		if srv, err = p.serve(); err != nil {
			klog.ErrorS(err, "Serving device plugin failed; retrying")
			return nil
		}
		p.setRegistered(false)
	}
	if p.registered() {
		return srv
	}
	if !fileExists(p.kubeletPath()) {
		klog.InfoS("Waiting for kubelet.sock", "path", p.kubeletPath())
		return srv
	}
	if err := p.register(ctx); err != nil {
		klog.ErrorS(err, "Registering with kubelet failed; retrying")
		return srv
	}
	p.setRegistered(true)
	p.registrations.Notify()
	return srv
}

// serve listens on the plugin socket (replacing a stale one) and serves the gRPC API.
func (p *Plugin) serve() (*grpc.Server, error) {
	path := p.socketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	klog.InfoS("Serving device plugin", "socket", path)
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			klog.ErrorS(err, "Device plugin gRPC server stopped")
		}
	}()
	return srv, nil
}

// register announces the plugin on kubelet.sock, retrying briefly because kubelet creates
// the socket a moment before it accepts calls.
func (p *Plugin) register(ctx context.Context) error {
	req := &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socketPath()),
		ResourceName: string(p.cfg.Resources.Mem),
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}
	var last error
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		if last = p.registerOnce(ctx, req); last == nil {
			klog.InfoS("Registered with kubelet", "resource", req.ResourceName, "endpoint", req.Endpoint)
			return nil
		}
	}
	return last
}

func (p *Plugin) registerOnce(ctx context.Context, req *pluginapi.RegisterRequest) error {
	conn, err := grpc.NewClient("unix://"+p.kubeletPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", p.kubeletPath(), err)
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(cctx, req); err != nil {
		return fmt.Errorf("registering %s with kubelet: %w", req.ResourceName, err)
	}
	return nil
}

func (p *Plugin) setRegistered(v bool) {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	p.isReg = v
}

// registered reports whether the last registration with kubelet succeeded.
func (p *Plugin) registered() bool {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	return p.isReg
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
