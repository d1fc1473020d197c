package dra

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// TestHandleError: only errors the helper does not mark recoverable end the plugin.
func TestHandleError(t *testing.T) {
	recoverable := fmt.Errorf("slice refused: %w", kubeletplugin.ErrRecoverable)
	tests := []struct {
		name      string
		err       error
		wantFatal bool
	}{
		{name: "recoverable", err: recoverable},
		{name: "fatal", err: errors.New("gRPC server stopped"), wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			var fatal error
			cfg.Fatal = func(err error) { fatal = err }
			newTestDriver(t, cfg).HandleError(context.Background(), tt.err, "background")
			if (fatal != nil) != tt.wantFatal {
				t.Errorf("Fatal got %v, want called %v", fatal, tt.wantFatal)
			}
			if fatal != nil && !errors.Is(fatal, tt.err) {
				t.Errorf("Fatal got %v, want it to wrap %v", fatal, tt.err)
			}
		})
	}
}

func TestNewRefusesABadInventory(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *DriverConfig)
	}{
		{name: "a card without UUID", mutate: func(c *DriverConfig) { c.Inventory.Devices[1].UUID = "" }},
		{name: "an index twice", mutate: func(c *DriverConfig) { c.Inventory.Devices[1].Index = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			tt.mutate(&cfg)
			if _, err := NewDriver(cfg); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
}
