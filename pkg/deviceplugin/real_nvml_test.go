//go:build cgo && nvml

// Allocate over the driver's real NVML library: only with `-tags nvml` on a machine with an
// NVIDIA GPU (`go test -tags nvml ./pkg/deviceplugin -run RealNVML -v`).
package deviceplugin

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// realNVMLEnv opens the driver's NVML and starts a plugin over it, with pod "p" asking for 4
// units of the machine's last card (so a multi-GPU machine checks a non-zero index too);
// configure adjusts the plugin's Config before New.
func realNVMLEnv(t *testing.T, configure func(*Config)) (*testEnv, gpunvml.Device) {
	t.Helper()
	nv, err := gpunvml.New(gpunvml.SystemLibrary(""))
	if err != nil {
		t.Fatalf("opening the driver's NVML: %v", err)
	}
	t.Cleanup(func() { nv.Shutdown() })
	devs, err := nv.Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("devices: %v, %v", devs, err)
	}
	card := devs[len(devs)-1]
	pod := makePod("p", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{card.Index: 4}))
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, pod)
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	n, err := noderuntime.New(noderuntime.Config{
		Name: testNode, Unit: gpushare.GiB, NVML: nv, Client: client, Pods: pods,
		Clock: clocktesting.NewFakeClock(epoch), HealthRecovery: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Resources: gpushare.DefaultResources(), PluginDir: shortTempDir(t), AllocateWait: 300 * time.Millisecond}
	if configure != nil {
		configure(&cfg)
	}
	p, err := New(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{plugin: p, client: client}, card
}

func TestAllocateRealNVML(t *testing.T) {
	e, card := realNVMLEnv(t, nil)
	units := gpushare.GiB.UnitsOf(card.MemoryMiB)
	got, err := e.allocate(t, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Allocate env on %s (%d MiB = %d GiB units): %v", card.Model, card.MemoryMiB, units, got)
	want := map[string]string{
		gpushare.EnvVisibleDevices: card.UUID,
		gpushare.EnvIndex:          strconv.Itoa(card.Index),
		gpushare.EnvContainerUnits: "4",
		gpushare.EnvPodUnits:       "4",
		gpushare.EnvDevUnits:       strconv.FormatInt(units, 10),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if a := e.podAnnotations(t, "p")[gpushare.AnnotationAssigned]; a != "true" {
		t.Errorf("ASSIGNED = %q after Allocate, want true", a)
	}
}

// TestAllocationSpecRealNVML: on a real GPU the per-allocation spec of a container names
// its card's device node, and the CDI library injects it (it reads the node's type and
// numbers from the host) with the allocation's variables.
func TestAllocationSpecRealNVML(t *testing.T) {
	dir := t.TempDir()
	e, card := realNVMLEnv(t, func(c *Config) {
		c.DeviceListStrategy, c.CDISpecDir = DeviceListCDIAllocation, dir
		c.CDIRegistryDirs = []string{dir} // the allocation spec alone, whatever NVIDIA's spec the machine has
	})
	resp, err := e.allocateResp(t, 4)
	if err != nil {
		t.Fatal(err)
	}
	env, spec := containerEnvAfterCDI(t, dir, resp.CdiDevices[0].Name)
	t.Logf("card %d (%s), minor %d: devices %+v", card.Index, card.UUID, card.Minor, spec.Linux.Devices)
	if env[gpushare.EnvVisibleDevices] != card.UUID || env[gpushare.EnvContainerUnits] != "4" {
		t.Errorf("env %v, want the card's UUID and 4 units", env)
	}
	want := "/dev/nvidia" + strconv.Itoa(card.Minor)
	found := false
	for _, d := range spec.Linux.Devices {
		found = found || (d.Path == want && d.Type == "c")
	}
	if !found {
		t.Errorf("devices %+v, want the character device %s", spec.Linux.Devices, want)
	}
}
