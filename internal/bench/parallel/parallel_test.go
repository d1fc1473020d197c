package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestForEachVisitsAll(t *testing.T) {
	var sum atomic.Int64
	if err := ForEach(context.Background(), 1000, 7, func(_ context.Context, i int) error {
		sum.Add(int64(i))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := sum.Load(); got != 999*1000/2 {
		t.Errorf("sum of indexes = %d, want %d", got, 999*1000/2)
	}
}

func TestForEachStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int64
	err := ForEach(context.Background(), 100000, 4, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 10 {
			return boom
		}
		return ctx.Err()
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	if calls.Load() >= 100000 {
		t.Errorf("all %d items ran after an error", calls.Load())
	}
}
