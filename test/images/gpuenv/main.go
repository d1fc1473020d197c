// Command gpuenv stands in for a GPU notebook in the demo and e2e images: it prints the
// GPU-related environment the device plugin's Allocate injected (NVIDIA_VISIBLE_DEVICES and
// every ALIYUN_COM_GPU_MEM_* variable, one KEY=value line each, sorted) and then sleeps until
// SIGTERM or SIGINT, so `kubectl logs` shows what the container got.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func main() {
	printEnv(os.Stdout, os.Environ())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	fmt.Println("gpuenv: terminating")
}

// memPrefix is the common prefix of the gpu-mem env vars (ALIYUN_COM_GPU_MEM_IDX, _POD, …);
// derived from the protocol package so new variables are printed without a change here.
var memPrefix = strings.TrimSuffix(gpushare.EnvIndex, "IDX")

// printEnv writes the GPU-related variables of env (KEY=value strings) in sorted order, or a
// line saying there are none (a pod that got no card).
func printEnv(w io.Writer, env []string) {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == gpushare.EnvVisibleDevices || strings.HasPrefix(k, memPrefix) {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		fmt.Fprintln(w, "gpuenv: no GPU environment")
	}
	for _, kv := range out {
		fmt.Fprintln(w, kv)
	}
}
