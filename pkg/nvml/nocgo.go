//go:build !cgo

package nvml

// Library stands in for go-nvml's interface in a build without cgo.
type Library interface{}

// Simulator is unavailable without cgo.
type Simulator struct{}

// New fails without cgo.
func New(Library) (Interface, error) { return nil, ErrNoCgo }

// SystemLibrary returns nothing usable without cgo; New reports ErrNoCgo.
func SystemLibrary(string) Library { return nil }

// NewSimulator fails without cgo.
func NewSimulator(string, []SimCard) (*Simulator, error) { return nil, ErrNoCgo }

// Library returns nil without cgo.
func (*Simulator) Library() Library { return nil }

// InjectXID fails without cgo.
func (*Simulator) InjectXID(int, uint64) error { return ErrNoCgo }
