// Command chartdocs rewrites the values table of a chart's README.md from the `# --`
// comments of its values.yaml: go run ./hack/chartdocs [-chart deploy/helm/gpushare].
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpushare/gpushare/internal/chartdocs"
)

func main() {
	chart := flag.String("chart", "deploy/helm/gpushare", "chart folder holding values.yaml and README.md")
	flag.Parse()
	if err := run(*chart); err != nil {
		fmt.Fprintln(os.Stderr, "chartdocs:", err)
		os.Exit(1)
	}
}

func run(chart string) error {
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	rows, err := chartdocs.Rows(values)
	if err != nil {
		return err
	}
	path := filepath.Join(chart, "README.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := chartdocs.Splice(string(readme), chartdocs.Table(rows))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
