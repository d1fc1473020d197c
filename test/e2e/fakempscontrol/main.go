// Command fakempscontrol stands in for NVIDIA's nvidia-cuda-mps-control on simulated cards:
// with -f it is a control daemon that listens in $CUDA_MPS_PIPE_DIRECTORY, keeps the defaults
// it is given and logs every command to $CUDA_MPS_LOG_DIRECTORY/control.log; without, it is
// the client that sends each line of stdin to that daemon and prints the answer. It serves no
// GPU: the e2e and pkg/mps tests use it to check the daemons' lifecycle and the caps they are
// given, never MPS itself.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	pipe := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	if pipe == "" {
		pipe = "/tmp/nvidia-mps"
	}
	sock := filepath.Join(pipe, "control")
	if len(os.Args) > 1 && os.Args[1] == "-f" {
		if err := serve(sock); err != nil {
			fmt.Fprintln(os.Stderr, "fakempscontrol:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(client(sock, os.Stdin))
}

func client(sock string, in io.Reader) int {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		c, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "Cannot find MPS control daemon process")
			return 1
		}
		fmt.Fprintln(c, line)
		b, _ := io.ReadAll(c)
		c.Close()
		if len(b) > 0 {
			fmt.Print(string(b))
		}
	}
	return 0
}

type daemon struct {
	mu       sync.Mutex
	defaults map[string]string
	log      *os.File
	quit     chan struct{}
	once     sync.Once
}

func serve(sock string) error {
	logDir := os.Getenv("CUDA_MPS_LOG_DIRECTORY")
	if logDir == "" {
		logDir = "/var/log/nvidia-mps"
	}
	lf, err := os.OpenFile(filepath.Join(logDir, "control.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	d := &daemon{defaults: map[string]string{"pinned": "", "threads": "100.0"}, log: lf, quit: make(chan struct{})}
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	_ = os.WriteFile(filepath.Join(filepath.Dir(sock), "nvidia-cuda-mps-control.pid"), []byte(fmt.Sprintln(os.Getpid())), 0o644)
	// Shows where this daemon's /dev/shm is: the e2e finds the file in the folder's shm/.
	_ = os.WriteFile("/dev/shm/fakempscontrol", []byte(fmt.Sprintln(os.Getpid())), 0o644)
	d.logf("Startup: card %s", os.Getenv("CUDA_VISIBLE_DEVICES"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-sig:
		case <-d.quit:
		}
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			d.logf("Exit")
			_ = os.Remove(sock)
			return nil
		}
		d.handle(c)
	}
}

func (d *daemon) logf(format string, a ...any) {
	fmt.Fprintf(d.log, "[%s] %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, a...))
}

func (d *daemon) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	d.logf("Command: %s", strings.Join(f, " "))
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case f[0] == "get_server_list":
	case f[0] == "set_default_device_pinned_mem_limit" && len(f) == 3:
		d.defaults["pinned"] = f[2]
	case f[0] == "get_default_device_pinned_mem_limit" && len(f) == 2:
		fmt.Fprintln(c, d.defaults["pinned"])
	case f[0] == "set_default_active_thread_percentage" && len(f) == 2:
		d.defaults["threads"] = f[1] + ".0"
	case f[0] == "get_default_active_thread_percentage":
		fmt.Fprintln(c, d.defaults["threads"])
	case f[0] == "quit":
		d.once.Do(func() { close(d.quit) })
	default:
		fmt.Fprintln(c, "Unknown command", f[0])
	}
}
