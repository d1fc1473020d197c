package main

import (
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// flagsDoc is the user guide whose "## Flags" table lists every flag of share-plugin.
const flagsDoc = "../../docs/share-plugin.md"

var flagName = regexp.MustCompile("`(--[a-z0-9-]+)`")

// TestFlagsTableComplete: the flags table of docs/share-plugin.md names every flag addFlags
// defines (klog's are not ours to document) and no flag share-plugin does not have.
func TestFlagsTableComplete(t *testing.T) {
	b, err := os.ReadFile(flagsDoc)
	if err != nil {
		t.Fatalf("reading the flags table: %v", err)
	}
	documented := flagsTable(t, string(b))

	var o options
	fs := pflag.NewFlagSet("share-plugin", pflag.ContinueOnError)
	o.addFlags(fs)
	defined := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { defined["--"+f.Name] = true })

	var missing, stale []string
	for f := range defined {
		if _, ok := documented[f]; !ok {
			missing = append(missing, f)
		}
	}
	for f, line := range documented {
		if !defined[f] {
			stale = append(stale, f+" (line "+line+")")
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("%s: the flags table lacks %s: add a row (flag, default, meaning)", flagsDoc, strings.Join(missing, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("%s: the flags table names %s, which share-plugin does not define", flagsDoc, strings.Join(stale, ", "))
	}
}

// flagsTable returns the flags named in the first column of the table under "## Flags", each
// with its line number.
func flagsTable(t *testing.T, doc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	in := false
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case line == "## Flags":
			in = true
		case in && strings.HasPrefix(line, "#"):
			return out
		case in && strings.HasPrefix(line, "| `--"):
			first := strings.SplitN(line[1:], "|", 2)[0]
			for _, m := range flagName.FindAllStringSubmatch(first, -1) {
				out[m[1]] = strconv.Itoa(i + 1)
			}
		}
	}
	if !in {
		t.Fatalf("%s has no \"## Flags\" section", flagsDoc)
	}
	return out
}
