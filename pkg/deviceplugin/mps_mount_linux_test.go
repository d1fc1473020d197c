package deviceplugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// roPipeChildEnv names the folder TestReadOnlyPipeFolderChild works on; unset, that test
// does nothing.
const roPipeChildEnv = "GPUSHARE_TEST_RO_PIPE_FOLDER"

// childCannotMount starts the child's skip message where its namespaces allow no mount.
const childCannotMount = "no read-only bind mount in this user namespace"

// TestReadOnlyPipeFolder: what mpsResponse relies on when it mounts a card's MPS pipe folder
// read-only, checked on this kernel. In a folder holding a named pipe and a listening unix
// socket (what an MPS daemon leaves there), a process that sees the folder through a
// read-only bind mount can still open the pipe for writing and write to it, and connect to
// the socket; it cannot create, remove or rename an entry. The process runs in a user and
// mount namespace of its own, so that the mount needs no privilege and stays private to it;
// where user namespaces, or mounts in them, are not allowed the test is skipped.
func TestReadOnlyPipeFolder(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "control")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The daemon's end: a reader, opened first so that the client's non-blocking open for
	// writing finds one.
	rfd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	reader := os.NewFile(uintptr(rfd), fifo)
	defer reader.Close()
	ln, err := net.Listen("unix", filepath.Join(dir, "server.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()

	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyPipeFolderChild$", "-test.v")
	cmd.Env = append(os.Environ(), roPipeChildEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot start a process in a user and mount namespace of its own here: %v", err)
	}
	if err != nil {
		t.Fatalf("through a read-only bind mount of the pipe folder: %v\n%s", err, out)
	}
	if i := bytes.Index(out, []byte(childCannotMount)); i >= 0 {
		t.Skipf("%s", out[i:])
	}
	buf := make([]byte, 16)
	if n, _ := reader.Read(buf); string(buf[:n]) != "get_server_list\n" {
		t.Errorf("the daemon's end of the pipe read %q, want what the client wrote", buf[:n])
	}
	select {
	case err := <-accepted:
		if err != nil {
			t.Errorf("accepting the client's connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the client's connection never reached the socket")
	}
}

// TestReadOnlyPipeFolderChild is TestReadOnlyPipeFolder's client, run by it in namespaces of
// its own: it bind-mounts the folder over itself read-only and then uses it as an MPS client
// of that folder could.
func TestReadOnlyPipeFolderChild(t *testing.T) {
	dir := os.Getenv(roPipeChildEnv)
	if dir == "" {
		t.Skip("run by TestReadOnlyPipeFolder")
	}
	if err := readOnlyBind(dir); err != nil {
		t.Skipf("%s: %v", childCannotMount, err)
	}
	w, err := os.OpenFile(filepath.Join(dir, "control"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("opening the named pipe for writing: %v", err)
	}
	if _, err := io.WriteString(w, "get_server_list\n"); err != nil {
		t.Errorf("writing to the named pipe: %v", err)
	}
	w.Close()
	c, err := net.Dial("unix", filepath.Join(dir, "server.sock"))
	if err != nil {
		t.Fatalf("connecting to the unix socket: %v", err)
	}
	c.Close()
	for what, try := range map[string]func() error{
		"create a file":      func() error { return os.WriteFile(filepath.Join(dir, "mine"), nil, 0o600) },
		"remove the pipe":    func() error { return os.Remove(filepath.Join(dir, "control")) },
		"rename the socket":  func() error { return os.Rename(filepath.Join(dir, "server.sock"), filepath.Join(dir, "old.sock")) },
		"make a named pipe":  func() error { return syscall.Mkfifo(filepath.Join(dir, "fake"), 0o600) },
		"listen on a socket": func() error { l, err := net.Listen("unix", filepath.Join(dir, "fake.sock")); closeIf(l); return err },
	} {
		if err := try(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in the read-only folder: %v, want EROFS", what, err)
		}
	}
}

// readOnlyBind makes dir a read-only bind mount of itself, in this process's mount namespace,
// after making every mount private so that nothing reaches the host's.
func readOnlyBind(dir string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", dir, err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remounting %s read-only: %w", dir, err)
	}
	return nil
}

func closeIf(l net.Listener) {
	if l != nil {
		l.Close()
	}
}
