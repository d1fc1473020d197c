package imports

import (
	"fmt"
	"slices"
	"strings"
)

// Package is what the rules read of one package in `go list -json` output: its import path
// and its direct imports, those of its own files, of its in-package tests and of its
// external (_test package) tests.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// Rule forbids the packages under From (each a path, or a path prefix ending in "/...") to
// import the packages under Forbid, except the packages under Except. Direct rules look at
// each package's own imports only; the others follow imports through every package
// between, the first step from the package's files or its tests, the next steps from
// non-test files.
type Rule struct {
	Name   string
	From   []string
	Except []string
	Forbid []string
	Direct bool
}

// Violation is a rule broken: Chain runs from a package under the rule's From to one under
// its Forbid, each package importing the next.
type Violation struct {
	Rule  string
	Chain []string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s", v.Rule, strings.Join(v.Chain, " -> "))
}

// Rules are the import rules of the module with path module.
func Rules(module string) []Rule {
	dp, dra := module+"/pkg/deviceplugin/...", module+"/pkg/dra/..."
	node := []string{module + "/pkg/nodecards/...", module + "/pkg/noderuntime/...", module + "/pkg/mps/..."}
	return []Rule{
		{Name: "pkg/dra must not depend on pkg/deviceplugin", From: []string{dra}, Forbid: []string{dp}},
		{Name: "pkg/deviceplugin must not depend on pkg/dra", From: []string{dp}, Forbid: []string{dra}},
		{Name: "the node layer (pkg/nodecards, pkg/noderuntime, pkg/mps) must not depend on a back end", From: node, Forbid: []string{dp, dra}},
		{Name: "only pkg/nvml imports go-nvml", From: []string{module + "/..."}, Except: []string{module + "/pkg/nvml"},
			Forbid: []string{"github.com/NVIDIA/go-nvml/..."}, Direct: true},
	}
}

// Check returns every violation of rules among pkgs, at most one per rule and package
// (the shortest chain), in the order of rules, then of pkgs. Packages an import names that pkgs
// does not hold end their chain there.
func Check(pkgs []Package, rules []Rule) []Violation {
	byPath := make(map[string]Package, len(pkgs))
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	var out []Violation
	for _, r := range rules {
		for _, p := range pkgs {
			if !under(p.ImportPath, r.From) || under(p.ImportPath, r.Except) {
				continue
			}
			if chain := r.path(p, byPath); chain != nil {
				out = append(out, Violation{Rule: r.Name, Chain: chain})
			}
		}
	}
	return out
}

// path is the shortest import chain from p to a forbidden package, nil when there is none.
func (r Rule) path(p Package, byPath map[string]Package) []string {
	first := slices.Concat(p.Imports, p.TestImports, p.XTestImports)
	parent := map[string]string{p.ImportPath: ""}
	queue := []string{}
	for _, imp := range first {
		if _, seen := parent[imp]; !seen {
			parent[imp] = p.ImportPath
			queue = append(queue, imp)
		}
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if under(cur, r.Forbid) {
			return chainTo(cur, parent)
		}
		if r.Direct {
			continue
		}
		for _, imp := range byPath[cur].Imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// chainTo walks parent back from end to the chain's start.
func chainTo(end string, parent map[string]string) []string {
	var chain []string
	for cur := end; cur != ""; cur = parent[cur] {
		chain = append(chain, cur)
	}
	slices.Reverse(chain)
	return chain
}

// under reports whether path is one of patterns: a path, or a prefix ending in "/..."
// that matches the prefix itself and everything below it.
func under(path string, patterns []string) bool {
	for _, pat := range patterns {
		if prefix, ok := strings.CutSuffix(pat, "/..."); ok {
			if path == prefix || strings.HasPrefix(path, prefix+"/") {
				return true
			}
		} else if path == pat {
			return true
		}
	}
	return false
}
