// Package parallel runs the benchmarks' API requests on a fixed number of workers.
package parallel

import (
	"context"
	"sync"
)

// ForEach calls fn(ctx, i) for i in [0, n) on `workers` goroutines and returns the first
// error (the others are cancelled through ctx), or ctx's error.
func ForEach(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	if workers < 1 {
		workers = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	work := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
