// Command gpuenv stands in for a GPU notebook in the demo and e2e images: it prints the
// GPU-related environment the device plugin's Allocate injected (NVIDIA_VISIBLE_DEVICES,
// CUDA_VISIBLE_DEVICES, every ALIYUN_COM_GPU_MEM_* and, on MPS nodes, CUDA_MPS_* variable, one
// KEY=value line per entry, sorted: a key given twice prints twice), plus
// GPUSHARE_SIMULATED_GPUS=<UUIDs> when the runtime mounted simulated cards from a CDI spec
// (the cdi-cri and cdi-allocation strategies), and then sleeps until SIGTERM or SIGINT, so `kubectl logs` shows
// what the container got.
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
	printEnv(os.Stdout, os.Environ(), simulatedGPUs(gpushare.SimulatedGPUDir))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	fmt.Println("gpuenv: terminating")
}

// memPrefix is the common prefix of the gpu-mem env vars (ALIYUN_COM_GPU_MEM_IDX, _POD, …);
// derived from the protocol package so new variables are printed without a change here.
var memPrefix = strings.TrimSuffix(gpushare.EnvIndex, "IDX")

// mpsPrefix is the common prefix of the MPS client variables share-plugin sets on nodes
// labelled gpushare.io/isolation=mps.
var mpsPrefix = strings.TrimSuffix(gpushare.EnvMPSPipeDirectory, "PIPE_DIRECTORY")

// envCUDAVisibleDevices is the cards CUDA uses; share-plugin's cdi-allocation strategy sets it.
const envCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"

// simulatedLine is the line printed for the simulated cards found in gpushare.SimulatedGPUDir.
const simulatedLine = "GPUSHARE_SIMULATED_GPUS"

// simulatedGPUs lists the UUIDs of the simulated cards mounted in dir (none when it is absent).
func simulatedGPUs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var uuids []string
	for _, e := range entries {
		uuids = append(uuids, e.Name())
	}
	return uuids
}

// printEnv writes the GPU-related variables of env (KEY=value strings) and, when simulated
// is not empty, GPUSHARE_SIMULATED_GPUS=<the UUIDs, sorted, comma separated>, in sorted
// order, or a line saying there are none (a pod that got no card).
func printEnv(w io.Writer, env, simulated []string) {
	var out []string
	if len(simulated) > 0 {
		s := append([]string(nil), simulated...)
		sort.Strings(s)
		out = append(out, simulatedLine+"="+strings.Join(s, ","))
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == gpushare.EnvVisibleDevices || k == envCUDAVisibleDevices || strings.HasPrefix(k, memPrefix) || strings.HasPrefix(k, mpsPrefix) {
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
