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

// Exit statuses of --check and --verify (without them every failure is 1).
const (
	// exitDisagreement: the views disagree, or an error outside --check.
	exitDisagreement = 1
	// exitCheckIncomplete: --check was misused, or could not read the API server or a
	// component the user named.
	exitCheckIncomplete = 2
)

// exitError carries the process exit status of an error.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// ExitCode is the exit status for an error the command returned: 0 for nil; with --check, 1
// when the views disagree and 2 when the check was misused or could not read the API server,
// or the extender or a share-plugin whose URL was given; with --verify, 1 when a node is NOT
// enforced and 2 when one could not be verified or the run could not start; 1 for every
// other error.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var e exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitDisagreement
}

// checkIncomplete gives err the exit status 2 when --check or --verify is on.
func checkIncomplete(flags *flagpole, err error) error {
	if err == nil || !(flags.Check || flags.Verify) {
		return err
	}
	return exitError{code: exitCheckIncomplete, err: err}
}
