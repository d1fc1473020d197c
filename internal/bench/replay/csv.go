package replay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// maxGPUsPerPod bounds num_gpu; the trace has at most 8 and no node has more than 8 cards.
const maxGPUsPerPod = 64

// readNodesFile parses a node CSV file (see parseNodes).
func readNodesFile(path string) ([]NodeSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading node list: %w", err)
	}
	defer f.Close()
	nodes, err := parseNodes(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nodes, nil
}

// readPodsFile parses a pod CSV file (see parsePods).
func readPodsFile(path string) ([]PodSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading pod list: %w", err)
	}
	defer f.Close()
	pods, err := parsePods(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pods, nil
}

// parseNodes reads a node CSV with the header columns sn, cpu_milli, memory_mib, gpu, model
// (any order; extra columns ignored). Errors name the line and column. Rows with gpu 0 are
// kept (CPU-only nodes); callers that want GPU nodes only filter on GPUs.
func parseNodes(r io.Reader) ([]NodeSpec, error) {
	t, err := newTable(r, []string{"sn", "cpu_milli", "memory_mib", "gpu"}, []string{"model"})
	if err != nil {
		return nil, err
	}
	var nodes []NodeSpec
	seen := map[string]int{}
	for {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		n := NodeSpec{Name: row.str("sn"), Model: row.str("model")}
		if n.Name == "" {
			return nil, row.errorf("sn", "empty node name")
		}
		if prev, dup := seen[n.Name]; dup {
			return nil, row.errorf("sn", "node %q already defined on line %d", n.Name, prev)
		}
		seen[n.Name] = row.line
		if n.MilliCPU, err = row.nonNegative("cpu_milli", 1<<40); err != nil {
			return nil, err
		}
		if n.MemoryMiB, err = row.nonNegative("memory_mib", 1<<40); err != nil {
			return nil, err
		}
		gpus, err := row.nonNegative("gpu", 1024)
		if err != nil {
			return nil, err
		}
		n.GPUs = int(gpus)
		if n.GPUs > 0 && n.Model == "" {
			return nil, row.errorf("model", "node %q has %d GPUs but no model", n.Name, n.GPUs)
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("node list has no rows")
	}
	return nodes, nil
}

// parsePods reads a pod CSV by header names: name, cpu_milli, memory_mib, num_gpu, gpu_milli
// are required, gpu_spec is optional (the multigpu files lack it and the time columns).
// gpu_milli must be in 1..1000 when num_gpu > 0 and 0 when num_gpu is 0. Errors name the
// line and column.
func parsePods(r io.Reader) ([]PodSpec, error) {
	t, err := newTable(r, []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}, []string{"gpu_spec"})
	if err != nil {
		return nil, err
	}
	var pods []PodSpec
	seen := map[string]int{}
	for {
		row, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		p := PodSpec{Name: row.str("name"), GPUSpec: splitSpec(row.str("gpu_spec"))}
		if p.Name == "" {
			return nil, row.errorf("name", "empty pod name")
		}
		if prev, dup := seen[p.Name]; dup {
			return nil, row.errorf("name", "pod %q already defined on line %d", p.Name, prev)
		}
		seen[p.Name] = row.line
		if p.MilliCPU, err = row.nonNegative("cpu_milli", 1<<40); err != nil {
			return nil, err
		}
		if p.MemoryMiB, err = row.nonNegative("memory_mib", 1<<40); err != nil {
			return nil, err
		}
		n, err := row.nonNegative("num_gpu", maxGPUsPerPod)
		if err != nil {
			return nil, err
		}
		p.NumGPU = int(n)
		if p.GPUMilli, err = row.nonNegative("gpu_milli", 1000); err != nil {
			return nil, err
		}
		switch {
		case p.NumGPU == 0 && p.GPUMilli != 0:
			return nil, row.errorf("gpu_milli", "%d with num_gpu 0", p.GPUMilli)
		case p.NumGPU > 0 && p.GPUMilli == 0:
			return nil, row.errorf("gpu_milli", "0 with num_gpu %d", p.NumGPU)
		}
		pods = append(pods, p)
	}
	if len(pods) == 0 {
		return nil, errors.New("pod list has no rows")
	}
	return pods, nil
}

// splitSpec splits "V100M16|V100M32" into distinct non-empty models, keeping their order.
func splitSpec(s string) []string {
	var out []string
	for _, m := range strings.Split(s, "|") {
		m = strings.TrimSpace(m)
		if m == "" || contains(out, m) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// table reads CSV rows and finds columns by header name.
type table struct {
	r     *csv.Reader
	col   map[string]int
	width int // fields a row needs: highest used column index + 1
}

func newTable(r io.Reader, required, optional []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked per row, with a clearer message
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty CSV: no header line")
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	t := &table{r: cr, col: map[string]int{}}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		t.col[h] = i
	}
	for _, name := range required {
		if _, ok := t.col[name]; !ok {
			return nil, fmt.Errorf("line 1: header lacks column %q (have %s)", name, strings.Join(header, ","))
		}
	}
	for _, name := range optional {
		if _, ok := t.col[name]; !ok {
			t.col[name] = -1
		}
	}
	for _, i := range t.col {
		if i+1 > t.width {
			t.width = i + 1
		}
	}
	return t, nil
}

type row struct {
	t      *table
	fields []string
	line   int
}

// next returns the next non-empty row, io.EOF at the end.
func (t *table) next() (row, error) {
	for {
		fields, err := t.r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return row{}, io.EOF
			}
			return row{}, err // csv.ParseError already names the line
		}
		line, _ := t.r.FieldPos(0)
		if len(fields) == 1 && strings.TrimSpace(fields[0]) == "" {
			continue
		}
		if len(fields) < t.width {
			return row{}, fmt.Errorf("line %d: %d fields, header needs %d", line, len(fields), t.width)
		}
		return row{t: t, fields: fields, line: line}, nil
	}
}

func (r row) str(col string) string {
	i := r.t.col[col]
	if i < 0 || i >= len(r.fields) {
		return ""
	}
	return strings.TrimSpace(r.fields[i])
}

func (r row) errorf(col, format string, args ...any) error {
	return fmt.Errorf("line %d, column %s: %s", r.line, col, fmt.Sprintf(format, args...))
}

// nonNegative parses an integer column in [0, max].
func (r row) nonNegative(col string, max int64) (int64, error) {
	s := r.str(col)
	if s == "" {
		return 0, r.errorf(col, "empty (want an integer)")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, r.errorf(col, "%q is not an integer", s)
	}
	if v < 0 || v > max {
		return 0, r.errorf(col, "%d out of range 0..%d", v, max)
	}
	return v, nil
}
