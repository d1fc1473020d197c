package inspect

import (
	"errors"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
)

// Errors with a fixed meaning, for callers and tests (errors.Is).
var (
	// errNoSharingNodes: the cluster has no node labelled cgpu=true, with the inventory
	// annotation or with allocatable gpu-mem.
	errNoSharingNodes = errors.New("no GPU-sharing nodes found")
	// errNotSharingNode: the NODE argument names a node that does not share GPUs.
	errNotSharingNode = errors.New("does not share GPUs")
)

// explain turns an error from talking to the cluster into the one line the user sees,
// naming the likely cause (no kubeconfig, API server unreachable, RBAC) before the detail.
func explain(err error) error {
	if err == nil {
		return nil
	}
	var urlErr *url.Error
	var netErr net.Error
	switch {
	case clientcmd.IsEmptyConfig(err):
		return wrapf(err, "no cluster configured (set --kubeconfig, KUBECONFIG or --server)")
	case apierrors.IsForbidden(err):
		return wrapf(err, "permission denied (need get/list on nodes, pods and events)")
	case apierrors.IsUnauthorized(err):
		return wrapf(err, "not authenticated to the cluster (check the kubeconfig credentials)")
	case errors.As(err, &urlErr) && strings.Contains(urlErr.URL, "//localhost:8080/"):
		// kubectl's built-in default server: nothing configured it.
		return wrapf(err, "no cluster configured (set --kubeconfig, KUBECONFIG or --server)")
	case errors.As(err, &urlErr), errors.As(err, &netErr):
		return wrapf(err, "cannot reach the cluster")
	}
	return oneLineErr{err}
}

// wrapf prefixes err with a cause, kept on one line and still matching errors.Is/As.
func wrapf(err error, cause string) error {
	return oneLineErr{prefixed{cause: cause, err: err}}
}

type prefixed struct {
	cause string
	err   error
}

func (p prefixed) Error() string { return p.cause + ": " + p.err.Error() }
func (p prefixed) Unwrap() error { return p.err }

// oneLineErr folds multi-line messages (some API and kubeconfig errors) onto one line, as
// a CLI's error line must be one line.
type oneLineErr struct{ err error }

func (o oneLineErr) Error() string { return strings.Join(strings.Fields(o.err.Error()), " ") }
func (o oneLineErr) Unwrap() error { return o.err }
