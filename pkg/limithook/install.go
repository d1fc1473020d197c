package limithook

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// BinaryName is the hook's file name where Install puts it.
const BinaryName = "gpushare-limit-hook"

// Install copies the executable at src into dir as BinaryName, mode 0755, replacing any
// earlier copy atomically: a runtime starting a container meanwhile runs the old hook or the
// new one, never half a file. The share-plugin DaemonSet's init container installs the
// hook on the host this way (the image has no shell or cp). Returns the installed path.
func Install(src, dir string) (string, error) { return InstallAs(src, dir, BinaryName) }

// InstallAs is Install under file name name: deploy/mps's init container copies gpushare-mps,
// another static program of the share-plugin image, the same way.
func InstallAs(src, dir, name string) (string, error) {
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("install folder %q: want an absolute path", dir)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("installing %s: %w", name, err)
	}
	defer in.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("installing %s: %w", name, err)
	}
	dst := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return "", fmt.Errorf("installing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return "", fmt.Errorf("installing %s into %s: %w", name, dir, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", fmt.Errorf("installing %s into %s: %w", name, dir, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("installing %s into %s: %w", name, dir, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("installing %s into %s: %w", name, dir, err)
	}
	return dst, nil
}
