package limithook

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInstall(t *testing.T) {
	src := filepath.Join(t.TempDir(), "hook")
	mustWrite(t, src, "new")
	dir := filepath.Join(t.TempDir(), "var", "lib", "gpushare", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, BinaryName), "old")
	got, err := Install(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(got)
	if err != nil || string(b) != "new" || got != filepath.Join(dir, BinaryName) {
		t.Errorf("installed %s = %q, %v; want the new hook at %s", got, b, err, filepath.Join(dir, BinaryName))
	}
	if fi, err := os.Stat(got); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed mode %v, %v; want 0755", fi.Mode(), err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*")); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
	if _, err := Install(src, "relative/bin"); err == nil {
		t.Error("Install into a relative folder: no error")
	}
}
