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

// AlreadyPlacedError: Reserve was asked for a pod the informer already saw bound.
type AlreadyPlacedError struct {
	Node string
}

func (e *AlreadyPlacedError) Error() string {
	return fmt.Sprintf("pod already holds cards on node %s", e.Node)
}
