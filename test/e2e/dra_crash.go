//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

// CaseDRAKilledBetweenSpecAndCheckpoint: share-plugin --backend=dra is killed (SIGKILL) in
// the middle of a claim's prepare, after it wrote the claim's CDI spec and before its
// checkpoint holds the claim, the one point where a crash leaves a spec that no checkpoint
// entry accounts for. The kill lands exactly there: a fanotify permission watch on the
// checkpoint's folder holds the plugin's first open in it (the checkpoint's temporary file)
// until the plugin is dead. The restarted plugin removes the leftover spec at start (its log
// says so), kubelet prepares the claim again, the pod runs, and every claim spec on the node
// has its checkpoint entry and every entry its spec.
func CaseDRAKilledBetweenSpecAndCheckpoint(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireDRAKubernetes(t, e)
	requireBinary(t, e, "share-plugin")
	if os.Geteuid() != 0 {
		t.Skip("fanotify permission events need root (the real node runs as root)")
	}
	ctx := testContext(t, 8*time.Minute)
	env := startDRAPlugin(ctx, t, e, filepath.Join(t.TempDir(), "faults"))
	ns := newNamespace(t, e)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = e.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		waitFor(ctx, t, time.Minute, "every claim unprepared", func() bool { return len(readDRACheckpoint(t)) == 0 })
	})
	tmpl := draNotebookTemplate(ctx, t, e, ns)
	cdiDir := filepath.Join(e.cfg.state, "cdi")
	pid := componentPID(t, e, "share-plugin")
	logFile := filepath.Join(e.cfg.state, "logs", "share-plugin.log")
	logBefore := fileSize(t, logFile)

	killed := holdFirstOpen(t, filepath.Dir(draCheckpoint), pid, func() {
		// The plugin is blocked in the open: the claim's spec must be there already.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill -9 share-plugin (pid %d): %v", pid, err)
		}
	})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash", Labels: tmpl.Labels}, Spec: *tmpl.Spec.DeepCopy()}
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: e.RealNode}
	createPod(t, e, p)
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("share-plugin never opened a file in its checkpoint folder while preparing the claim")
	}
	if !exited(pid, 15*time.Second) {
		t.Fatalf("share-plugin (pid %d) still runs after SIGKILL", pid)
	}
	claimUID := podClaimUID(ctx, t, e, ns, "crash")
	specs, err := nodecards.ClaimSpecUIDs(cdiDir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(specs, claimUID) {
		t.Fatalf("killed at the checkpoint write, the claim's spec %s is missing (specs: %v): the spec is not written first",
			nodecards.ClaimSpecPath(cdiDir, claimUID), specs)
	}
	if _, ok := readDRACheckpoint(t)[string(claimUID)]; ok {
		t.Fatalf("killed at the checkpoint write, the checkpoint already holds claim %s", claimUID)
	}
	t.Logf("share-plugin killed with claim %s's spec written and not checkpointed", claimUID)

	startDRAPluginProc(ctx, t, e, env)
	waitPod(t, e, ns, "crash", 3*time.Minute, "Running after the plugin restarted", isRunning)
	if log := fileTail(t, logFile, logBefore); !strings.Contains(log, "Removed the CDI spec of a claim the checkpoint does not hold") ||
		!strings.Contains(log, string(claimUID)) {
		t.Errorf("the restarted share-plugin did not log removing claim %s's leftover spec; its log:\n%s", claimUID, log)
	}
	specs, err = nodecards.ClaimSpecUIDs(cdiDir)
	if err != nil {
		t.Fatal(err)
	}
	var held []types.UID
	for uid := range readDRACheckpoint(t) {
		held = append(held, types.UID(uid))
	}
	slices.Sort(held)
	if !slices.Equal(specs, held) {
		t.Errorf("claim specs %v and checkpoint entries %v differ after the restart", specs, held)
	}
}

// holdFirstOpen watches dir with a fanotify permission mark: the first open of a file in it
// by process pid waits while do runs, and is then refused; opens by other processes are let
// through. The returned channel closes after do. The mark goes with the test.
func holdFirstOpen(t *testing.T, dir string, pid int, do func()) <-chan struct{} {
	t.Helper()
	// Non-blocking, polled: a read blocked in the kernel would outlive closing the group.
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY)
	if err != nil {
		t.Fatalf("fanotify_init: %v", err)
	}
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN_PERM|unix.FAN_EVENT_ON_CHILD, unix.AT_FDCWD, dir); err != nil {
		_ = unix.Close(fd)
		t.Fatalf("fanotify_mark %s: %v", dir, err)
	}
	done := make(chan struct{})
	stop := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		<-stopped
		// Closing the group lets any open still held through.
		_ = unix.Close(fd)
	})
	go func() {
		defer close(stopped)
		buf := make([]byte, 4096)
		fired := false
		for {
			select {
			case <-stop:
				return
			default:
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(fds, 200); err != nil || n == 0 {
				continue
			}
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				continue
			}
			meta := int(unsafe.Sizeof(unix.FanotifyEventMetadata{}))
			for off := 0; off+meta <= n; {
				m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
				verdict := uint32(unix.FAN_ALLOW)
				if int(m.Pid) == pid && !fired {
					fired = true
					do()
					verdict = unix.FAN_DENY
					close(done)
				}
				respond(fd, m.Fd, verdict)
				_ = unix.Close(int(m.Fd))
				if m.Event_len == 0 {
					break
				}
				off += int(m.Event_len)
			}
		}
	}()
	return done
}

func respond(group int, fd int32, verdict uint32) {
	r := unix.FanotifyResponse{Fd: fd, Response: verdict}
	_, _ = unix.Write(group, (*[unsafe.Sizeof(r)]byte)(unsafe.Pointer(&r))[:])
}

// componentPID is the PID hack/cluster-up.sh recorded for a component.
func componentPID(t *testing.T, e *Env, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.cfg.state, "pids", name))
	if err != nil {
		t.Fatalf("reading %s's pid file: %v", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s's pid file: %v", name, err)
	}
	return pid
}

// podClaimUID is the UID of the claim generated for the pod's one resource claim.
func podClaimUID(ctx context.Context, t *testing.T, e *Env, ns, pod string) types.UID {
	t.Helper()
	var uid types.UID
	waitFor(ctx, t, time.Minute, fmt.Sprintf("pod %s/%s's claim", ns, pod), func() bool {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) != 1 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false
		}
		c, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		uid = c.UID
		return true
	})
	return uid
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return fi.Size()
}

// fileTail is path's content from offset on.
func fileTail(t *testing.T, path string, offset int64) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	return string(b[offset:])
}
