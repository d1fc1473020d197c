package schedulerplugin

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "GPUShare"

type Plugin struct{}

func (*Plugin) Name() string { return Name }

func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) { return &Plugin{}, nil }
