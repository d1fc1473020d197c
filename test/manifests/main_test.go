package manifests_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests from deploy/, so that paths read as users see them there
// (admission/*.yaml, extender/rbac.yaml, ../VERSION).
func TestMain(m *testing.M) {
	if err := os.Chdir("../../deploy"); err != nil {
		fmt.Fprintln(os.Stderr, "manifests tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
