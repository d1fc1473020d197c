package funclen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot is the repository root, two folders above this package.
const repoRoot = "../.."

// TestProductFunctionsAreShort: no function of cmd/, pkg/ or internal/ (tests aside) is
// over MaxLines lines.
func TestProductFunctionsAreShort(t *testing.T) {
	long, err := Check(repoRoot, []string{"cmd", "pkg", "internal"}, MaxLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Errorf("%v: split it into named steps", l)
	}
}

// TestCheck: functions and methods over the limit are named with their place and length;
// test files, functions at the limit and bodiless declarations are not.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lines := func(n int) string { // a body making a function of n lines
		s := ""
		for i := 0; i < n-2; i++ {
			s += "\t_ = 0\n"
		}
		return s
	}
	write("pkg/a/a.go", "package a\n\nfunc ok() {\n"+lines(4)+"}\n\nfunc long() {\n"+lines(5)+"}\n\ntype T[K any] struct{}\n\nfunc (t *T[K]) M() {\n"+lines(6)+"}\n\nfunc asm()\n")
	write("pkg/a/a_test.go", "package a\n\nfunc longTest() {\n"+lines(9)+"}\n")
	write("cmd/c/main.go", "package main\n\nfunc main() {\n"+lines(7)+"}\n")
	got, err := Check(dir, []string{"cmd", "pkg", "internal"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Long{
		{Pos: "cmd/c/main.go:3", Name: "main", Lines: 7},
		{Pos: "pkg/a/a.go:8", Name: "long", Lines: 5},
		{Pos: "pkg/a/a.go:16", Name: "T.M", Lines: 6},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Check (-want +got):\n%s", d)
	}
	write("pkg/b/b.go", "package b\nfunc {")
	if _, err := Check(dir, []string{"pkg"}, 4); err == nil {
		t.Errorf("Check of a file that does not parse: no error")
	}
}

// TestMissingFolder: a folder the repository does not have holds no function.
func TestMissingFolder(t *testing.T) {
	got, err := Check(t.TempDir(), []string{"internal"}, 4)
	if err != nil || len(got) != 0 {
		t.Errorf("Check of a missing folder = %v, %v; want nothing", got, err)
	}
}
