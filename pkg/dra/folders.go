package dra

import (
	"fmt"
	"os"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

// prepareFolders is how the claims' specs show the cards (device nodes, or on a simulated
// node the files it writes now) and creates the plugin's data folder. Errors: the
// simulated cards' files or the data folder cannot be written.
func (p *Plugin) prepareFolders() (nodecards.CardSpecs, error) {
	specs := nodecards.CardSpecs{Dir: p.cfg.CDISpecDir, Minors: p.node.Minors()}
	if p.node.Simulated() {
		if _, err := nodecards.WriteSimulatedCDISpec(p.cfg.CDISpecDir, p.cfg.CDIKind, p.node.Cards()); err != nil {
			return specs, fmt.Errorf("writing the simulated GPUs' files: %w", err)
		}
		specs.SimulatedCardDir = nodecards.SimulatedCardDir(p.cfg.CDISpecDir)
	}
	if err := os.MkdirAll(p.cfg.PluginDataDir, 0o750); err != nil {
		return specs, fmt.Errorf("creating the plugin's data folder: %w", err)
	}
	return specs, nil
}
