package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/leader"
)

// election is the running campaign: lost receives leader.ErrLost when the lease is lost;
// stop ends the campaign and waits for it; cancel only ends it.
type election struct {
	lost   <-chan error
	stop   func()
	cancel func()
}

// startElection campaigns with e (nil: no election) once c is ready, so that a replica
// still listing pods never takes the lease from a warm standby. The campaign's context
// outlives ctx: the lease is released only after the servers drained their in-flight binds
// (election.stop).
func startElection(ctx context.Context, c *cache.Cache, e *leader.Elector) election {
	lost := make(chan error, 1)
	exited := make(chan struct{})
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if e == nil {
		return election{lost: lost, stop: func() {}, cancel: cancel}
	}
	go func() {
		defer close(exited)
		if err := campaign(ctx, ectx, c, e); err != nil {
			lost <- err
		}
	}()
	return election{lost: lost, cancel: cancel, stop: func() { cancel(); <-exited }}
}

// newElector builds the leader elector of --leader-elect on client, with a fresh identity,
// calling onChange when this replica starts or stops leading.
func newElector(cfg leader.Config, client kubernetes.Interface, onChange func(bool)) (*leader.Elector, error) {
	id, err := leader.NewIdentity()
	if err != nil {
		return nil, err
	}
	cfg.Client, cfg.Identity, cfg.OnChange = client, id, onChange
	klog.InfoS("leader election enabled", "lease", cfg.Namespace+"/"+cfg.Name, "identity", id,
		"leaseDuration", cfg.LeaseDuration, "renewDeadline", cfg.RenewDeadline, "retryPeriod", cfg.RetryPeriod)
	return leader.New(cfg)
}

// campaign waits (until ctx ends) for the cache to be ready, then runs e until ectx ends. It
// returns leader.ErrLost when the lease is lost, nil otherwise.
func campaign(ctx, ectx context.Context, c *cache.Cache, e *leader.Elector) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return c.Ready(), nil })
	if err != nil {
		return nil // shutting down before the cache synced: never campaigned
	}
	return e.Run(ectx)
}
