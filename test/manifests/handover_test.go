package manifests_test

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// handover is how a share-plugin DaemonSet hands cards to the runtime: its
// --device-list-strategy, its --cdi-spec-dir and whether that folder is the host's, mounted
// read-write at the same path (the specs share-plugin writes name host paths).
type handover struct {
	Strategy, CDISpecDir string
	WritesCDI            bool
}

// handoverOf reads the handover of share-plugin's pod spec.
func handoverOf(spec corev1.PodSpec) handover {
	var h handover
	for _, a := range spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--device-list-strategy="); ok {
			h.Strategy = v
		}
		if v, ok := strings.CutPrefix(a, "--cdi-spec-dir="); ok {
			h.CDISpecDir = v
		}
	}
	h.WritesCDI = h.CDISpecDir != "" && mountsHostPath(spec, h.CDISpecDir)
	return h
}
