package demo

import (
	"fmt"
	"regexp"
	"strings"
)

// Output is what one `make demo` run printed on stdout, split at its `=== TITLE` banners.
type Output struct {
	// Sections maps each banner's title to the lines up to the next banner.
	Sections map[string][]string
	// Titles are the banners' titles in the order printed.
	Titles []string
	// Exports are the `export NAME=VALUE` lines after the first banner, verbatim, for a new
	// shell to run.
	Exports []string
}

// ParseOutput splits a run's stdout. Lines before the first banner (build and cluster
// logs) are dropped.
func ParseOutput(stdout string) Output {
	o := Output{Sections: map[string][]string{}}
	title := ""
	for _, l := range strings.Split(stdout, "\n") {
		if t, ok := strings.CutPrefix(l, "=== "); ok {
			title = t
			o.Titles = append(o.Titles, t)
			o.Sections[t] = nil
			continue
		}
		// Only the demo's own exports, after its first banner: cluster-up prints one too.
		if title != "" && strings.HasPrefix(l, "export ") {
			o.Exports = append(o.Exports, l)
		}
		if title != "" && strings.TrimSpace(l) != "" {
			o.Sections[title] = append(o.Sections[title], l)
		}
	}
	return o
}

// Want is what a run of one variant must show.
type Want struct {
	// Backend is device-plugin or dra: which reason the pending notebook's event gives.
	Backend string
	// RealNode: the notebooks ran on the kubelet node and print their GPU environment
	// (false: the kwok stand-in, whose pods run nothing).
	RealNode bool
}

// occupancyLine is the inspect summary line for 3 × 4 GiB on one 14 GiB card.
var occupancyLine = regexp.MustCompile(`^12/14 \(85%\)$`)

// Check returns every way the run differs from the README's promise (none: it holds):
// three notebooks Running, the fourth Pending with a FailedScheduling reason, each running
// notebook given a card and 4 units, `kubectl inspect gpushare NODE` ending in
// `12/14 (85%)`, and the KUBECONFIG and PATH exports for the user's shell.
func (o Output) Check(w Want) []string {
	var problems []string
	add := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	running, pending := o.notebooks()
	if len(running) != 3 || len(pending) != 1 {
		add("kubectl get pods: want 3 notebooks Running and 1 Pending, got Running %v, Pending %v", running, pending)
	}

	if w.RealNode {
		env := o.section("GPU environment of each notebook")
		for _, pod := range running {
			for _, want := range []string{pod + ": NVIDIA_VISIBLE_DEVICES=GPU-", pod + ": ALIYUN_COM_GPU_MEM_CONTAINER=4"} {
				if !hasPrefixLine(env, want) {
					add("GPU environment: no line starting %q", want)
				}
			}
		}
	}

	why := o.section("Why ")
	reason := map[string]string{"device-plugin": "aliyun.com/gpu-mem", "dra": "claim"}[w.Backend]
	switch {
	case len(why) == 0 || strings.HasPrefix(why[0], "("):
		add("the fourth notebook's pending reason is missing: %q", why)
	case !strings.Contains(why[0], reason):
		add("the fourth notebook's pending reason %q does not name %q", why[0], reason)
	}

	inspect := false
	for _, t := range o.Titles {
		if !strings.HasPrefix(t, "kubectl inspect gpushare ") {
			continue
		}
		for _, l := range o.Sections[t] {
			inspect = inspect || occupancyLine.MatchString(strings.TrimSpace(l))
		}
	}
	if !inspect {
		add("no `kubectl inspect gpushare NODE` section with the line \"12/14 (85%%)\" (sections: %q)", o.Titles)
	}

	for _, name := range []string{"KUBECONFIG", "PATH"} {
		if !hasPrefixLine(o.Exports, "export "+name+"=") {
			add("no `export %s=` line for the user's shell (exports: %q)", name, o.Exports)
		}
	}
	return problems
}

// notebooks reads the pods table: the notebook pods Running and Pending.
func (o Output) notebooks() (running, pending []string) {
	for _, l := range o.section("kubectl get pods") {
		f := strings.Fields(l)
		if len(f) < 3 || !strings.HasPrefix(f[0], "tf-notebook") {
			continue
		}
		switch f[2] {
		case "Running":
			running = append(running, f[0])
		case "Pending":
			pending = append(pending, f[0])
		}
	}
	return running, pending
}

// section is the first section whose title starts with prefix.
func (o Output) section(prefix string) []string {
	for _, t := range o.Titles {
		if strings.HasPrefix(t, prefix) {
			return o.Sections[t]
		}
	}
	return nil
}

func hasPrefixLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
