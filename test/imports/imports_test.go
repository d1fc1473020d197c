package imports

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot is the repository root, two folders above this package.
const repoRoot = "../.."

// builds are the build configurations whose files the rules see: the default one, the
// e2e suite and the real-NVML tests, and a build without cgo (pkg/nvml's nocgo.go).
var builds = []struct {
	name string
	env  []string
	args []string
}{
	{name: "default"},
	{name: "tags e2e,nvml", args: []string{"-tags=e2e,nvml"}},
	{name: "CGO_ENABLED=0", env: []string{"CGO_ENABLED=0"}},
}

// TestImportRules: no package of the module breaks an import rule in any build.
func TestImportRules(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			module, pkgs := listPackages(t, b.env, b.args)
			for _, v := range Check(pkgs, Rules(module)) {
				t.Errorf("%v", v)
			}
		})
	}
}

// listPackages runs `go list -deps -json ./...` at the repository root, outside any
// workspace, and returns the main module's path and every package it lists.
func listPackages(t *testing.T, env, args []string) (string, []Package) {
	t.Helper()
	cmd := exec.Command("go", slices.Concat([]string{"list", "-deps", "-json"}, args, []string{"./..."})...)
	cmd.Dir = repoRoot
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var module string
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Module *struct {
				Path string
				Main bool
			}
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		if p.Module != nil && p.Module.Main {
			module = p.Module.Path
		}
		pkgs = append(pkgs, p.Package)
	}
	if module == "" {
		t.Fatal("go list named no package of the main module")
	}
	return module, pkgs
}

// TestCheck: the rules' logic on hand-made packages of a module m.
func TestCheck(t *testing.T) {
	const m = "example.com/m"
	nvml := "github.com/NVIDIA/go-nvml/pkg/nvml"
	tests := []struct {
		name string
		pkgs []Package
		want []Violation
	}{
		{
			name: "the layers as they should be",
			pkgs: []Package{
				{ImportPath: m + "/pkg/dra", Imports: []string{m + "/pkg/nodecards", "fmt"}, XTestImports: []string{m + "/pkg/dra"}},
				{ImportPath: m + "/pkg/deviceplugin", Imports: []string{m + "/pkg/nodecards"}},
				{ImportPath: m + "/pkg/nodecards", Imports: []string{m + "/pkg/nvml"}},
				{ImportPath: m + "/pkg/nvml", Imports: []string{nvml}, TestImports: []string{nvml + "/mock"}},
				{ImportPath: m + "/cmd/share-plugin", Imports: []string{m + "/pkg/dra", m + "/pkg/deviceplugin"}},
				{ImportPath: nvml},
			},
		},
		{
			name: "a back end imports the other",
			pkgs: []Package{
				{ImportPath: m + "/pkg/dra", Imports: []string{m + "/pkg/deviceplugin"}},
				{ImportPath: m + "/pkg/deviceplugin"},
			},
			want: []Violation{{Rule: "pkg/dra must not depend on pkg/deviceplugin", Chain: []string{m + "/pkg/dra", m + "/pkg/deviceplugin"}}},
		},
		{
			name: "through another package, the shortest chain",
			pkgs: []Package{
				{ImportPath: m + "/pkg/deviceplugin", Imports: []string{m + "/pkg/a", m + "/pkg/b"}},
				{ImportPath: m + "/pkg/a", Imports: []string{m + "/pkg/c"}},
				{ImportPath: m + "/pkg/c", Imports: []string{m + "/pkg/dra/sub"}},
				{ImportPath: m + "/pkg/b", Imports: []string{m + "/pkg/dra"}},
				{ImportPath: m + "/pkg/dra", Imports: []string{m + "/pkg/dra/sub"}},
				{ImportPath: m + "/pkg/dra/sub"},
			},
			want: []Violation{{Rule: "pkg/deviceplugin must not depend on pkg/dra", Chain: []string{m + "/pkg/deviceplugin", m + "/pkg/b", m + "/pkg/dra"}}},
		},
		{
			name: "from a back end's test",
			pkgs: []Package{
				{ImportPath: m + "/pkg/dra/sub", XTestImports: []string{m + "/pkg/deviceplugin/x"}},
				{ImportPath: m + "/pkg/deviceplugin/x"},
			},
			want: []Violation{{Rule: "pkg/dra must not depend on pkg/deviceplugin", Chain: []string{m + "/pkg/dra/sub", m + "/pkg/deviceplugin/x"}}},
		},
		{
			name: "a dependency's test does not count",
			pkgs: []Package{
				{ImportPath: m + "/pkg/dra", Imports: []string{m + "/pkg/a"}},
				{ImportPath: m + "/pkg/a", TestImports: []string{m + "/pkg/deviceplugin"}},
				{ImportPath: m + "/pkg/deviceplugin"},
			},
		},
		{
			name: "a name that only starts like a back end",
			pkgs: []Package{
				{ImportPath: m + "/pkg/dra", Imports: []string{m + "/pkg/devicepluginx"}},
				{ImportPath: m + "/pkg/draft", Imports: []string{m + "/pkg/deviceplugin"}},
				{ImportPath: m + "/pkg/devicepluginx"},
				{ImportPath: m + "/pkg/deviceplugin"},
			},
		},
		{
			name: "the node layer imports a back end",
			pkgs: []Package{
				{ImportPath: m + "/pkg/nodecards", Imports: []string{m + "/pkg/util"}},
				{ImportPath: m + "/pkg/util", Imports: []string{m + "/pkg/dra"}},
				{ImportPath: m + "/pkg/dra", Imports: []string{m + "/pkg/nodecards"}},
			},
			want: []Violation{{Rule: "the node layer (pkg/nodecards, pkg/noderuntime, pkg/mps) must not depend on a back end", Chain: []string{m + "/pkg/nodecards", m + "/pkg/util", m + "/pkg/dra"}}},
		},
		{
			name: "the node runtime imports a back end",
			pkgs: []Package{
				{ImportPath: m + "/pkg/noderuntime", Imports: []string{m + "/pkg/nodecards", m + "/pkg/deviceplugin"}},
				{ImportPath: m + "/pkg/nodecards"},
				{ImportPath: m + "/pkg/deviceplugin", Imports: []string{m + "/pkg/noderuntime"}},
			},
			want: []Violation{{Rule: "the node layer (pkg/nodecards, pkg/noderuntime, pkg/mps) must not depend on a back end", Chain: []string{m + "/pkg/noderuntime", m + "/pkg/deviceplugin"}}},
		},
		{
			name: "go-nvml outside pkg/nvml, in a test too",
			pkgs: []Package{
				{ImportPath: m + "/pkg/limithook", Imports: []string{nvml}},
				{ImportPath: m + "/pkg/watchdog", TestImports: []string{nvml + "/mock"}},
				{ImportPath: m + "/pkg/nvml", Imports: []string{nvml}},
				{ImportPath: m + "/pkg/nvmlx", XTestImports: []string{nvml}},
				{ImportPath: nvml, Imports: []string{"github.com/NVIDIA/go-nvml/pkg/dl"}},
			},
			want: []Violation{
				{Rule: "only pkg/nvml imports go-nvml", Chain: []string{m + "/pkg/limithook", nvml}},
				{Rule: "only pkg/nvml imports go-nvml", Chain: []string{m + "/pkg/watchdog", nvml + "/mock"}},
				{Rule: "only pkg/nvml imports go-nvml", Chain: []string{m + "/pkg/nvmlx", nvml}},
			},
		},
		{
			name: "go-nvml through pkg/nvml is allowed",
			pkgs: []Package{
				{ImportPath: m + "/pkg/limithook", Imports: []string{m + "/pkg/nvml"}},
				{ImportPath: m + "/pkg/nvml", Imports: []string{nvml}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, Check(tt.pkgs, Rules(m))); d != "" {
				t.Errorf("violations (-want +got):\n%s", d)
			}
		})
	}
}
