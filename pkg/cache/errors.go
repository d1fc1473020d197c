package cache

import (
	"errors"
	"fmt"
)

// ErrUnknownNode: no node of that name matches the node selector (or it was deleted).
var ErrUnknownNode = errors.New("not a gpushare node")

// ErrNoCards: the node matches the selector but has no GPU cards (no gpu-mem, or an
// inventory without devices).
var ErrNoCards = errors.New("node has no GPU cards")

// IsolationError: the node's isolation label (gpushare.LabelIsolation) refuses the pod (a
// container on several cards of an MPS node), or its value is invalid: then the node takes
// no GPU pod until an administrator fixes it, since a typo must not silently drop the
// isolation it meant to ask for. Evicting pods cannot help.
type IsolationError struct {
	Err error
}

func (e *IsolationError) Error() string { return e.Err.Error() }
func (e *IsolationError) Unwrap() error { return e.Err }

// InventoryError: the node's GPU inventory holds a value out of range (*gpushare.RangeError):
// the node takes no GPU pod, and counts in no capacity, until whoever publishes it fixes it.
// Evicting pods cannot help.
type InventoryError struct {
	Err error
}

func (e *InventoryError) Error() string {
	return "node's GPU inventory is out of range, it takes no GPU pod until fixed: " + e.Err.Error()
}
func (e *InventoryError) Unwrap() error { return e.Err }

// AlreadyPlacedError: Reserve was asked for a pod the informer already saw bound.
type AlreadyPlacedError struct {
	Node string
}

func (e *AlreadyPlacedError) Error() string {
	return fmt.Sprintf("pod already holds cards on node %s", e.Node)
}

// ErrBindInFlight: Reserve gave up waiting (its context ended) for the outcome of an earlier
// Binding call of the same pod. Retry later: the cards stay held meanwhile.
var ErrBindInFlight = errors.New("an earlier Binding of the pod is still in flight; retry later")

// HeldElsewhereError: Reserve was asked for a node other than the one where the pod already
// holds cards for an earlier bind, whose Binding may still land.
type HeldElsewhereError struct {
	Node string
}

func (e *HeldElsewhereError) Error() string {
	return fmt.Sprintf("pod holds cards on node %s for an earlier bind whose Binding may still land", e.Node)
}
