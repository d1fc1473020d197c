package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat: 100 on every Linux
// architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// ProcStats is one reading of a process' memory and CPU time.
type ProcStats struct {
	RSSBytes   int64   `json:"rssBytes"`   // VmRSS
	HWMBytes   int64   `json:"hwmBytes"`   // VmHWM: peak RSS since start
	CPUSeconds float64 `json:"cpuSeconds"` // user + system
}

// readProc reads /proc/<pid>/status and /proc/<pid>/stat. Errors: no such process, or
// files not in the expected format.
func readProc(pid int) (ProcStats, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("reading the status of pid %d: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcStats{}, fmt.Errorf("reading the stat of pid %d: %w", pid, err)
	}
	return parseProc(string(status), string(stat))
}

func parseProc(status, stat string) (ProcStats, error) {
	var s ProcStats
	for _, line := range strings.Split(status, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return ProcStats{}, fmt.Errorf("status line %q: want \"<n> kB\"", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return ProcStats{}, fmt.Errorf("status line %q: %w", line, err)
		}
		if key == "VmRSS" {
			s.RSSBytes = kb << 10
		} else {
			s.HWMBytes = kb << 10
		}
	}
	if s.RSSBytes == 0 {
		return ProcStats{}, fmt.Errorf("status has no VmRSS line (kernel thread or zombie?)")
	}
	// The command name in parentheses may hold spaces: fields start after the last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return ProcStats{}, fmt.Errorf("stat %q: no ')' after the command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return ProcStats{}, fmt.Errorf("stat has %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return ProcStats{}, fmt.Errorf("stat cpu time %q: %w", s, err)
		}
		ticks += v
	}
	s.CPUSeconds = float64(ticks) / clockTicks
	return s, nil
}
