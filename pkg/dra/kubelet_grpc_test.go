package dra

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestKubeletGRPC drives the driver as kubelet does: through the kubelet plugin helper's
// gRPC socket, the helper reading the claims from the API (a fake clientset).
func TestKubeletGRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := testConfig(t.TempDir())
	regDir := filepath.Join(t.TempDir(), "registry")
	for _, dir := range []string{cfg.DataDir, regDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	fits := claim("cccccccc-0000-4000-8000-000000000001", "fits", result("gpu", "gpu-1", "4Gi"))
	big := claim("cccccccc-0000-4000-8000-000000000002", "big", result("gpu", "gpu-0", "16Gi"))
	client := fake.NewClientset(fits, big)
	helper, err := kubeletplugin.Start(ctx, newTestDriver(t, cfg),
		kubeletplugin.DriverName(gpushare.DRADriverName), kubeletplugin.KubeClient(client), kubeletplugin.NodeName(testNode),
		kubeletplugin.PluginDataDirectoryPath(cfg.DataDir), kubeletplugin.RegistrarDirectoryPath(regDir),
		kubeletplugin.HealthService(false))
	if err != nil {
		t.Fatalf("starting the kubelet plugin helper: %v", err)
	}
	defer helper.Stop()

	conn, err := grpc.NewClient("unix://"+filepath.Join(cfg.DataDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	kubelet := drapb.NewDRAPluginClient(conn)
	ref := func(c *resourceapi.ResourceClaim) *drapb.Claim {
		return &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
	}

	resp, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{ref(fits), ref(big)}})
	if err != nil {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	got := resp.Claims[string(fits.UID)]
	wantID := nodecards.ClaimCDIKind + "=" + string(fits.UID)
	if got == nil || got.Error != "" || len(got.Devices) != 1 || got.Devices[0].DeviceName != "gpu-1" ||
		got.Devices[0].PoolName != testNode || strings.Join(got.Devices[0].CdiDeviceIds, ",") != wantID {
		t.Errorf("prepared %v, want gpu-1 of %s with %s", got, testNode, wantID)
	}
	if r := resp.Claims[string(big.UID)]; r == nil || !strings.Contains(r.Error, "asks 16 GiB units of card 0, which has 14") {
		t.Errorf("oversized claim answered %v, want its reason", r)
	}
	path := nodecards.ClaimSpecPath(cfg.Specs.Dir, fits.UID)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no CDI spec after prepare: %v", err)
	}

	uresp, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{ref(fits)}})
	if err != nil {
		t.Fatalf("NodeUnprepareResources: %v", err)
	}
	if r := uresp.Claims[string(fits.UID)]; r == nil || r.Error != "" {
		t.Errorf("unprepared %v, want no error", r)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}
}
