package mps

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Control starts control daemons and sends them commands: the seam between the launcher and
// NVIDIA's nvidia-cuda-mps-control (ExecControl), faked in tests.
type Control interface {
	// Start starts f's control daemon in the foreground, serving f.Card alone, with f's pipe
	// and log folders and f's shm folder as its /dev/shm. It returns once the process runs.
	Start(ctx context.Context, f Folder) (Process, error)
	// Send sends one command to f's daemon and returns what it printed. Errors: the daemon
	// cannot be reached or refused the command.
	Send(ctx context.Context, f Folder, command string) (string, error)
}

// Process is a started control daemon.
type Process interface {
	Pid() int
	// Done is closed once the process has exited.
	Done() <-chan struct{}
	// Kill kills it (SIGKILL) and its process group.
	Kill() error
}

// ExecControl runs NVIDIA's nvidia-cuda-mps-control: daemons through Self's exec-daemon
// subcommand (ExecDaemon: a mount namespace of its own, the shm folder bind-mounted on
// /dev/shm), commands through its client mode, one per call, as `echo CMD |
// nvidia-cuda-mps-control` sends them.
type ExecControl struct {
	// Binary is nvidia-cuda-mps-control's path (or a name looked up in PATH).
	Binary string
	// Self is the path of the program whose first argument "exec-daemon" runs ExecDaemon
	// (gpushare-mps). Empty: the daemon runs without a /dev/shm of its own (tests only).
	Self string
}

// daemonEnv is the environment of f's daemon and of the commands sent to it: the card alone
// and f's folders; nothing else of the launcher's.
func daemonEnv(f Folder) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"CUDA_VISIBLE_DEVICES=" + f.Card,
		"CUDA_MPS_PIPE_DIRECTORY=" + f.Pipe(),
		"CUDA_MPS_LOG_DIRECTORY=" + f.Log(),
	}
}

// Start implements Control.
func (c ExecControl) Start(_ context.Context, f Folder) (Process, error) {
	argv := []string{c.Binary, "-f"}
	if c.Self != "" {
		argv = append([]string{c.Self, ExecDaemonCommand, f.Shm(), "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = daemonEnv(f)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// A group of its own, so that Kill reaches the servers it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s for %s: %w", c.Binary, f.Key(), err)
	}
	p := &execProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Send implements Control. nvidia-cuda-mps-control prints nothing for a set_ command it
// accepted and a message otherwise, so output naming an error counts as a refusal.
func (c ExecControl) Send(ctx context.Context, f Folder, command string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Binary)
	cmd.Env = daemonEnv(f)
	cmd.Stdin = strings.NewReader(command + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	s := strings.TrimSpace(out.String())
	if err == nil && refusal(s) {
		err = fmt.Errorf("refused")
	}
	if err != nil {
		return s, fmt.Errorf("MPS daemon %s: %q: %w (%s)", f.Key(), command, err, firstLine(s))
	}
	return s, nil
}

func refusal(out string) bool {
	l := strings.ToLower(out)
	for _, w := range []string{"error", "invalid", "unknown", "usage", "cannot", "failed"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

type execProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *execProcess) Pid() int              { return p.cmd.Process.Pid }
func (p *execProcess) Done() <-chan struct{} { return p.done }
func (p *execProcess) Kill() error           { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
