package scale

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Pod sets of the scheduling phases: a) kube-scheduler alone, b) kube-scheduler with the
// extender, or b) gpushare-scheduler (the plugin). Each phase's result is <set>.json.
const (
	SetPlain    = "plain"
	SetExtender = "extender"
	SetPlugin   = "plugin"
	// SetDRA is kube-scheduler alone on pods asking through ResourceClaims, SetDRAPlugin
	// gpushare-scheduler on the same (MODE=dra).
	SetDRA       = "dra"
	SetDRAPlugin = "dra-plugin"
)

// Result file names in the output folder, one per step.
const (
	FileSetup          = "setup.json"
	FilePlain          = "plain.json"
	FileExtender       = "extender.json"
	FilePlugin         = "plugin.json"
	FileDRA            = "dra.json"
	FileDRAPlugin      = "dra-plugin.json"
	FileDRASetup       = "dra-setup.json"
	FileBurst          = "burst.json"
	FileMemory         = "memory.json"
	FileMemoryRestart  = "memory-restart.json"
	FileReportMarkdown = "report.md"
	// RoundDirPrefix names the folders of the plugin mode's rounds (round-1, round-2, …),
	// each holding that round's plain.json and plugin.json.
	RoundDirPrefix = "round-"
)

// Targets the scale benchmark is judged against (docs/design/benchmarks.md).
const (
	TargetRatio = 0.8
	// TargetPluginRatio is gpushare-scheduler's rate over kube-scheduler's alone, under
	// every packing policy (the median of the alternating rounds).
	TargetPluginRatio   = 0.95
	TargetFilterP99Ms   = 10.0
	TargetBurstSeconds  = 2.0
	TargetRSSMiB        = 100.0
	TargetHandlerFilter = 2.0 // ms, Go benchmark (see test/bench)
)

// WriteJSON writes v indented to path. Errors: encoding or file errors.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readJSON reads path into v; ok is false when the file does not exist (step not run).
func readJSON(path string, v any) (ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decoding %s: %w", path, err)
	}
	return true, nil
}

// Results are every step's results; nil for a step that did not run.
type Results struct {
	Setup    *SetupResult
	Plain    *PhaseResult
	Extender *PhaseResult
	Plugin   *PhaseResult // phase b by gpushare-scheduler instead of kube-scheduler + extender
	// DRA and DRAPlugin are the DRA mode's phases on claims: kube-scheduler alone, and
	// gpushare-scheduler; DRASetup the publishing of the ResourceSlices.
	DRA, DRAPlugin *PhaseResult
	DRASetup       *SetupResult
	// PluginPolicy is the GPUShare policy of the plugin phase (its target depends on it).
	PluginPolicy  string
	Burst         *BurstResult
	Memory        *MemoryResult
	MemoryRestart *MemoryResult
	// Rounds are the plugin mode's alternating a/b rounds, in order (round-N folders);
	// nil for a single round, whose phases are Plain and Plugin.
	Rounds []Round
}

// Round is one a/b pair of the plugin mode: kube-scheduler alone, then gpushare-scheduler,
// on the same nodes and pods, back to back.
type Round struct {
	Plain, Plugin PhaseResult
	// DRA and DRAPlugin are the DRA mode's phases of the round (nil in other modes).
	DRA, DRAPlugin *PhaseResult
}

// Ratio is the round's b/a in pods/s (0 when a measured nothing).
func (r Round) Ratio() float64 {
	if r.Plain.PodsPerSecond <= 0 {
		return 0
	}
	return r.Plugin.PodsPerSecond / r.Plain.PodsPerSecond
}

// median of v (not empty), which it sorts.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// LoadResults reads the result files of dir. Errors: unreadable or malformed files.
func LoadResults(dir string) (Results, error) {
	var r Results
	load := func(name string, dst any, set func()) error {
		ok, err := readJSON(filepath.Join(dir, name), dst)
		if ok {
			set()
		}
		return err
	}
	var (
		setup      SetupResult
		plain, ext PhaseResult
		plugin     PhaseResult
		draA, draC PhaseResult
		draSetup   SetupResult
		burst      BurstResult
		mem, memR  MemoryResult
	)
	err := errors.Join(
		load(FileSetup, &setup, func() { r.Setup = &setup }),
		load(FilePlain, &plain, func() { r.Plain = &plain }),
		load(FileExtender, &ext, func() { r.Extender = &ext }),
		load(FilePlugin, &plugin, func() { r.Plugin = &plugin }),
		load(FileDRA, &draA, func() { r.DRA = &draA }),
		load(FileDRAPlugin, &draC, func() { r.DRAPlugin = &draC }),
		load(FileDRASetup, &draSetup, func() { r.DRASetup = &draSetup }),
		load(FileBurst, &burst, func() { r.Burst = &burst }),
		load(FileMemory, &mem, func() { r.Memory = &mem }),
		load(FileMemoryRestart, &memR, func() { r.MemoryRestart = &memR }),
	)
	if err != nil {
		return r, err
	}
	r.Rounds, err = loadRounds(dir)
	return r, err
}

// loadRounds reads dir's round-N folders, N = 1, 2, … until one is missing; nil for fewer
// than two. Errors: a round folder without both phases, or malformed files.
func loadRounds(dir string) ([]Round, error) {
	var out []Round
	for n := 1; ; n++ {
		sub := filepath.Join(dir, fmt.Sprintf("%s%d", RoundDirPrefix, n))
		if _, err := os.Stat(sub); errors.Is(err, fs.ErrNotExist) {
			break
		}
		var rd Round
		okA, errA := readJSON(filepath.Join(sub, FilePlain), &rd.Plain)
		okB, errB := readJSON(filepath.Join(sub, FilePlugin), &rd.Plugin)
		if err := errors.Join(errA, errB); err != nil {
			return nil, err
		}
		if !okA || !okB {
			return nil, fmt.Errorf("%s lacks %s or %s", sub, FilePlain, FilePlugin)
		}
		if err := loadDRARound(sub, &rd); err != nil {
			return nil, err
		}
		out = append(out, rd)
	}
	if len(out) < 2 {
		return nil, nil
	}
	return out, nil
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r Results) pluginPolicy() string {
	if r.PluginPolicy == "" {
		return "binpack"
	}
	return r.PluginPolicy
}

// pluginTarget is the b/a target of the plugin phase.
func (r Results) pluginTarget() float64 { return TargetPluginRatio }
