package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPrintEnv(t *testing.T) {
	tests := []struct {
		name      string
		env       []string
		simulated []string
		want      string
	}{
		{
			name: "gpu vars sorted, others dropped",
			env: []string{"PATH=/bin", "ALIYUN_COM_GPU_MEM_POD=4", "NVIDIA_VISIBLE_DEVICES=GPU-1",
				"ALIYUN_COM_GPU_MEM_IDX=0", "HOME=/", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M", "CUDA_VISIBLE_DEVICES=0", "CUDA_HOME=/usr/local/cuda"},
			want: "ALIYUN_COM_GPU_MEM_IDX=0\nALIYUN_COM_GPU_MEM_POD=4\nCUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M\nCUDA_VISIBLE_DEVICES=0\nNVIDIA_VISIBLE_DEVICES=GPU-1\n",
		},
		{
			name:      "simulated cards from CDI, no NVIDIA_VISIBLE_DEVICES",
			env:       []string{"ALIYUN_COM_GPU_MEM_IDX=0,1", "PATH=/bin"},
			simulated: []string{"GPU-b", "GPU-a"},
			want:      "ALIYUN_COM_GPU_MEM_IDX=0,1\nGPUSHARE_SIMULATED_GPUS=GPU-a,GPU-b\n",
		},
		{
			name: "a key given twice prints twice",
			env:  []string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES=GPU-1"},
			want: "NVIDIA_VISIBLE_DEVICES=GPU-1\nNVIDIA_VISIBLE_DEVICES=all\n",
		},
		{
			name: "none",
			env:  []string{"PATH=/bin"},
			want: "gpuenv: no GPU environment\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printEnv(&b, tc.env, tc.simulated)
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("printEnv (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSimulatedGPUs(t *testing.T) {
	dir := t.TempDir()
	if got := simulatedGPUs(dir + "/absent"); got != nil {
		t.Errorf("absent folder: %v", got)
	}
	for _, n := range []string{"GPU-2", "GPU-1"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]string{"GPU-1", "GPU-2"}, simulatedGPUs(dir)); d != "" {
		t.Errorf("(-want,+got):\n%s", d)
	}
}
