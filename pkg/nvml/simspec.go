package nvml

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxSimCards bounds a simulated node; no real node has more cards.
const maxSimCards = 64

// SimCard is one simulated card. An empty UUID is replaced by SimulatedUUID.
type SimCard struct {
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"` // total memory as NVML would report it
	UUID      string `json:"uuid,omitempty"`
}

// simModels are the presets of --simulate, with the total memory the real cards report.
var simModels = map[string]SimCard{
	"t4":        {Model: "Tesla T4", MemoryMiB: 15079},
	"p100-16gb": {Model: "Tesla P100-PCIE-16GB", MemoryMiB: 16280},
	"v100-16gb": {Model: "Tesla V100-SXM2-16GB", MemoryMiB: 16160},
	"v100-32gb": {Model: "Tesla V100-SXM2-32GB", MemoryMiB: 32510},
	"a10":       {Model: "NVIDIA A10", MemoryMiB: 23028},
	"l4":        {Model: "NVIDIA L4", MemoryMiB: 23034},
	"a100-40gb": {Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960},
	"a100-80gb": {Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920},
	"h100-80gb": {Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559},
}

// SimModels lists the preset names accepted by ParseSimSpec, sorted.
func SimModels() []string {
	out := make([]string, 0, len(simModels))
	for k := range simModels {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseSimSpec parses the --simulate value: a comma list of <model>[:<count>], e.g. "t4",
// "a100-80gb:8", "t4,a100-80gb". Cards are numbered in the order given. UUIDs are left
// empty (NewSimulator derives them from the node name).
func ParseSimSpec(spec string) ([]SimCard, error) {
	var out []SimCard
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, num, hasCount := strings.Cut(f, ":")
		card, ok := simModels[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return nil, fmt.Errorf("simulate %q: unknown model %q (known: %s)", spec, name, strings.Join(SimModels(), ", "))
		}
		count := 1
		if hasCount {
			n, err := strconv.Atoi(strings.TrimSpace(num))
			if err != nil || n < 1 || n > maxSimCards {
				return nil, fmt.Errorf("simulate %q: count %q of %s must be an integer 1..%d", spec, num, name, maxSimCards)
			}
			count = n
		}
		for i := 0; i < count; i++ {
			out = append(out, card)
		}
	}
	if err := validateSimCards(out); err != nil {
		return nil, fmt.Errorf("simulate %q: %w", spec, err)
	}
	return out, nil
}

// LoadSimFile reads a YAML (or JSON) list of SimCard from path:
//
//   - model: Tesla T4
//     memoryMiB: 15079
//     uuid: GPU-0f0e…   # optional
func LoadSimFile(path string) ([]SimCard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading simulated GPU spec: %w", err)
	}
	var cards []SimCard
	if err := yaml.UnmarshalStrict(b, &cards); err != nil {
		return nil, fmt.Errorf("simulated GPU spec %s: %w", path, err)
	}
	if err := validateSimCards(cards); err != nil {
		return nil, fmt.Errorf("simulated GPU spec %s: %w", path, err)
	}
	return cards, nil
}

func validateSimCards(cards []SimCard) error {
	if len(cards) == 0 {
		return fmt.Errorf("no cards")
	}
	if len(cards) > maxSimCards {
		return fmt.Errorf("%d cards, at most %d", len(cards), maxSimCards)
	}
	seen := map[string]bool{}
	for i, c := range cards {
		switch {
		case strings.TrimSpace(c.Model) == "":
			return fmt.Errorf("card %d: model is empty", i)
		case c.MemoryMiB <= 0:
			return fmt.Errorf("card %d: memoryMiB %d must be positive", i, c.MemoryMiB)
		case c.UUID != "" && seen[c.UUID]:
			return fmt.Errorf("card %d: uuid %s appears twice", i, c.UUID)
		}
		seen[c.UUID] = c.UUID != ""
	}
	return nil
}

// SimulatedUUID is the UUID of simulated card index on node: "GPU-" followed by the first
// 16 bytes of sha256("gpushare-sim/<node>/<index>") as 8-4-4-4-12 hex digits. Stable across
// restarts, distinct across nodes, predictable by tests.
func SimulatedUUID(node string, index int) string {
	sum := sha256.Sum256([]byte("gpushare-sim/" + node + "/" + strconv.Itoa(index)))
	h := hex.EncodeToString(sum[:16])
	return "GPU-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
