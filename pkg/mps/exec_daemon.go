package mps

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// ExecDaemonCommand is the subcommand of gpushare-mps that runs ExecDaemon:
//
//	gpushare-mps exec-daemon SHM -- nvidia-cuda-mps-control -f
const ExecDaemonCommand = "exec-daemon"

// ExecDaemon replaces the calling process with argv, in a mount namespace of its own where shm
// is /dev/shm: the control daemon and the servers it starts then share their POSIX shared
// memory with exactly the clients that get shm mounted as their /dev/shm, and with no other
// daemon's. It returns only on error (needs CAP_SYS_ADMIN).
func ExecDaemon(shm string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("%s: no program to run", ExecDaemonCommand)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("%s: %w", ExecDaemonCommand, err)
	}
	// unshare(2) applies to the calling thread; exec then carries it to the new program.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("%s: a mount namespace of its own: %w", ExecDaemonCommand, err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("%s: making mounts private: %w", ExecDaemonCommand, err)
	}
	if err := unix.Mount(shm, "/dev/shm", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("%s: mounting %s on /dev/shm: %w", ExecDaemonCommand, shm, err)
	}
	return unix.Exec(path, argv, os.Environ())
}
