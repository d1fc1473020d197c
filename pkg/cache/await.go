package cache

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// awaitPoll is how often AwaitUncounted looks at the ledger again.
const awaitPoll = time.Millisecond

// AwaitUncounted waits until the ledger counts nothing for the pod uid (Counted is false) or
// ctx ends, and reports whether the ledger stopped counting it. For a caller that hears of a
// pod's deletion from another handler of the same informer and must not read the ledger as
// it was before the deletion (the framework plugin's queueing hints).
func (c *Cache) AwaitUncounted(ctx context.Context, uid types.UID) bool {
	t := time.NewTicker(awaitPoll)
	defer t.Stop()
	for {
		if _, _, counted := c.Counted(uid); !counted {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
