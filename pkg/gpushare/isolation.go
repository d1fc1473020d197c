package gpushare

import "fmt"

// LabelIsolation is the node label that states how the cards of a node keep their tenants
// apart: IsolationNone (also when the label is absent) or IsolationMPS. Node labels are set
// by cluster administrators; tenants cannot write them.
const LabelIsolation = "gpushare.io/isolation"

// Isolation is a node's enforcement mode, the value of LabelIsolation.
type Isolation string

const (
	// IsolationNone is cooperative sharing: the ALIYUN_COM_GPU_MEM_* contract tells each
	// container its grant and share-plugin's usage watchdog reports containers above it;
	// nothing stops a container from allocating the whole card.
	IsolationNone Isolation = "none"
	// IsolationMPS runs each card behind an NVIDIA MPS control daemon and gives each
	// container a pinned device-memory limit equal to its grant, so CUDA allocations beyond
	// the grant fail inside that container.
	IsolationMPS Isolation = "mps"
)

// ParseIsolation reads a LabelIsolation value; "" (no label) is IsolationNone. Errors: any
// other value, naming the label and the accepted values.
func ParseIsolation(v string) (Isolation, error) {
	switch i := Isolation(v); i {
	case "":
		return IsolationNone, nil
	case IsolationNone, IsolationMPS:
		return i, nil
	}
	return "", fmt.Errorf("node label %s=%q: want %s or %s", LabelIsolation, v, IsolationNone, IsolationMPS)
}
