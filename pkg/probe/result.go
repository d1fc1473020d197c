package probe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Marker is Result.Probe: it tells the result line from the rest of a log.
const Marker = "gpushare-probe"

// Roles of the container the probe runs in.
const (
	// RoleGranted: the container was granted gpu-mem.
	RoleGranted = "granted"
	// RoleSibling: a container of the same pod granted nothing, which must see no card.
	RoleSibling = "sibling"
)

// Result is what the probe found, printed as one JSON line (WriteTo) that `kubectl inspect
// gpushare --verify` reads back from the container's log (ParseResult). Memory in MiB.
type Result struct {
	Probe   string `json:"probe"`
	Version string `json:"version"`
	Role    string `json:"role"`
	// Promise is the isolation the node's labels promise.
	Promise gpushare.Isolation `json:"promise"`
	// Handover is how cards reached the container (Sight.Handover).
	Handover string `json:"handover"`
	// ExpectCards is how many cards the container was granted; Seen the card UUIDs it
	// reaches by any path (the environment, the simulated cards' files, the driver).
	ExpectCards int      `json:"expectCards"`
	Seen        []string `json:"seen"`
	Sight       Sight    `json:"sight"`
	// Driver is "libcuda.so.1" when the driver answered, else why not.
	Driver string `json:"driver"`
	// Devices are the cards CUDA shows, MPS whether their contexts go through MPS.
	Devices []Device `json:"devices,omitempty"`
	MPS     MPSState `json:"mps"`
	// GrantMiB is the container's grant (ALIYUN_COM_GPU_MEM_CONTAINER units × the node's
	// unit), Measurements the stepwise allocations, one per card.
	GrantMiB     int64         `json:"grantMiB,omitempty"`
	Measurements []Measurement `json:"measurements,omitempty"`
	Checks       []Check       `json:"checks"`
	Verdict      Verdict       `json:"verdict"`
}

// Line is the human summary: the verdict, then each check's verdict and facts.
func (r Result) Line() string {
	parts := make([]string, 0, len(r.Checks))
	for _, c := range r.Checks {
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", c.Name, c.Verdict, c.Detail))
	}
	return fmt.Sprintf("%s %s container: %s; %s", Marker, r.Role, r.Verdict, strings.Join(parts, "; "))
}

// JSON is the result line, without a newline.
func (r Result) JSON() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding the probe's result: %w", err)
	}
	return string(b), nil
}

// ParseResult finds the last result line in a container's log. Errors: no line that decodes
// as a Result with Probe set to Marker, or one without a verdict.
func ParseResult(log string) (Result, error) {
	var found *Result
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r Result
		if json.Unmarshal([]byte(line), &r) == nil && r.Probe == Marker {
			found = &r
		}
	}
	if err := sc.Err(); err != nil {
		return Result{}, fmt.Errorf("reading the probe's log: %w", err)
	}
	if found == nil {
		return Result{}, fmt.Errorf("no %s result line in the log", Marker)
	}
	switch found.Verdict {
	case VerdictEnforced, VerdictNotEnforced, VerdictCannotVerify:
		return *found, nil
	}
	return Result{}, fmt.Errorf("%s result line: verdict %q: want %q, %q or %q", Marker, found.Verdict, VerdictEnforced, VerdictNotEnforced, VerdictCannotVerify)
}
