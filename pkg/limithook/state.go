package limithook

import (
	"encoding/json"
	"fmt"
	"io"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// maxStateBytes bounds what is read of the container state: a few hundred bytes plus the
// annotations.
const maxStateBytes = 1 << 20

// ReadState reads the OCI container state the runtime writes on a hook's stdin. Errors: not
// JSON, or no positive pid (the container's process is not there yet).
func ReadState(r io.Reader) (specs.State, error) {
	var s specs.State
	b, err := io.ReadAll(io.LimitReader(r, maxStateBytes))
	if err != nil {
		return specs.State{}, fmt.Errorf("reading the container state from stdin: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return specs.State{}, fmt.Errorf("reading the container state from stdin: %w", err)
	}
	if s.Pid <= 0 {
		return specs.State{}, fmt.Errorf("the container state of %q has no pid (%d): run the hook as createRuntime", s.ID, s.Pid)
	}
	return s, nil
}
