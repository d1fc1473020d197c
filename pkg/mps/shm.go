package mps

import (
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// shmMounter mounts and unmounts a daemon's shm tmpfs: a seam so that tests run without
// CAP_SYS_ADMIN.
type shmMounter interface {
	mount(dir string, size int64) error
	unmount(dir string) error
}

type tmpfsMounter struct{}

// mount mounts a tmpfs of size bytes on dir unless one is already there (a restarted
// launcher keeps the one the daemon's clients already use).
func (tmpfsMounter) mount(dir string, size int64) error {
	if mounted(dir) {
		return nil
	}
	opts := "mode=1777,size=" + strconv.FormatInt(size, 10)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mounting a tmpfs of %d bytes on %s: %w", size, dir, err)
	}
	return nil
}

func (tmpfsMounter) unmount(dir string) error {
	if !mounted(dir) {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	return nil
}

// mounted says whether dir is a mount point: on another device than its parent.
func mounted(dir string) bool {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false
	}
	return st.Dev != parent.Dev
}
