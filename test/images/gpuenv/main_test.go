package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPrintEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{
			name: "gpu vars sorted, others dropped",
			env: []string{"PATH=/bin", "ALIYUN_COM_GPU_MEM_POD=4", "NVIDIA_VISIBLE_DEVICES=GPU-1",
				"ALIYUN_COM_GPU_MEM_IDX=0", "HOME=/"},
			want: "ALIYUN_COM_GPU_MEM_IDX=0\nALIYUN_COM_GPU_MEM_POD=4\nNVIDIA_VISIBLE_DEVICES=GPU-1\n",
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
			printEnv(&b, tc.env)
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("printEnv (-want,+got):\n%s", diff)
			}
		})
	}
}
