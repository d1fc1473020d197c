package main

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/leader"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/routes"
	"github.com/gpushare/gpushare/pkg/version"
)

// builtRoutes are the extender's handlers and, with --leader-elect, its elector.
type builtRoutes struct {
	handlers *routes.Handlers
	elector  *leader.Elector // nil without --leader-elect
}

// newRoutes builds the verbs' and diagnostics' handlers over c and, with --leader-elect,
// the elector they follow (with --pod-name, also the pod label that marks the leader);
// without it this replica always leads. Errors: those of the elector and of routes.New.
func newRoutes(ctx context.Context, o *options, client kubernetes.Interface, c *cache.Cache, m *metrics.Metrics,
	pol policy.Policy, res gpushare.Resources, sel labels.Selector) (builtRoutes, error) {
	rc := routes.Config{
		Cache: c, Policy: pol, Resources: res, Client: client,
		Metrics: m, NodeSelector: sel.String(), MaxRequestBytes: o.maxRequestBytes,
		MaxNodesPerRequest: o.maxNodesPerRequest, MaxInflight: o.maxInflight, PodGetQPS: o.podGetQPS, PodGetBurst: o.podGetBurst,
		SchedulerNames: o.schedulerNames, BindNonGPUPods: o.bindNonGPUPods, Version: version.Version,
	}
	var out builtRoutes
	if o.leaderElect {
		onChange := m.SetLeader
		if o.podName != "" {
			// A label left by an earlier run of this pod must not draw the scheduler's calls.
			label := newLeaderLabel(client, o.podNamespace, o.podName)
			label.set(false)
			go label.run(ctx)
			onChange = func(leading bool) { m.SetLeader(leading); label.set(leading) }
		}
		var err error
		if out.elector, err = newElector(o.leaderElection, client, onChange); err != nil {
			return out, err
		}
		rc.Leadership = out.elector
	} else {
		m.SetLeader(true)
	}
	var err error
	out.handlers, err = routes.New(rc)
	return out, err
}
