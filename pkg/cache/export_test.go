package cache

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// ExpireNow runs one expiry pass at the clock's current time and returns when it is done:
// a test that steps the fake clock then knows a pass saw the new time, instead of hoping the
// ticker's pass has run.
func (c *Cache) ExpireNow(ctx context.Context) { c.expire(ctx) }

// EndGraceNow runs one pass of the grace period's end at the clock's current time, as
// ExpireNow does for expiry.
func (c *Cache) EndGraceNow() { c.endGrace() }

// RetriesWaiting is the number of Reserve calls for uid blocked on the outcome of its
// Binding call in flight (0 when none is in flight).
func (c *Cache) RetriesWaiting(uid types.UID) int {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if r, ok := c.reserved[uid]; ok && r.flight != nil {
		return r.flight.waiting
	}
	return 0
}
