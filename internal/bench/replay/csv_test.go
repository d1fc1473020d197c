package replay

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNodes(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    []NodeSpec
		wantErr string
	}{
		{
			name: "trace header",
			csv: "sn,cpu_milli,memory_mib,gpu,model\n" +
				"openb-node-0000,64000,262144,2,P100\n" +
				"openb-node-0001,96000,786432,8,G2\n" +
				"openb-node-0002,32000,131072,0,\n",
			want: []NodeSpec{
				{Name: "openb-node-0000", MilliCPU: 64000, MemoryMiB: 262144, GPUs: 2, Model: "P100"},
				{Name: "openb-node-0001", MilliCPU: 96000, MemoryMiB: 786432, GPUs: 8, Model: "G2"},
				{Name: "openb-node-0002", MilliCPU: 32000, MemoryMiB: 131072},
			},
		},
		{
			name: "columns found by name in any order, extra columns ignored",
			csv:  "model,gpu,extra,memory_mib,cpu_milli,sn\nT4,2,x,1024,8000,n1\n",
			want: []NodeSpec{{Name: "n1", MilliCPU: 8000, MemoryMiB: 1024, GPUs: 2, Model: "T4"}},
		},
		{
			name:    "missing column",
			csv:     "sn,cpu_milli,gpu,model\nn1,1,1,T4\n",
			wantErr: `line 1: header lacks column "memory_mib"`,
		},
		{
			name:    "not a number, with its line",
			csv:     "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn2,lots,1,1,T4\n",
			wantErr: `line 3, column cpu_milli: "lots" is not an integer`,
		},
		{
			name:    "negative",
			csv:     "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,-2,T4\n",
			wantErr: "line 2, column gpu: -2 out of range 0..1024",
		},
		{
			name:    "GPUs without model",
			csv:     "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,\n",
			wantErr: `line 2, column model: node "n1" has 2 GPUs but no model`,
		},
		{
			name:    "duplicate name",
			csv:     "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn1,1,1,1,T4\n",
			wantErr: `line 3, column sn: node "n1" already defined on line 2`,
		},
		{
			name:    "short row",
			csv:     "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1\n",
			wantErr: "line 2: 3 fields, header needs 5",
		},
		{
			name:    "empty",
			csv:     "",
			wantErr: "empty CSV: no header line",
		},
		{
			name:    "header only",
			csv:     "sn,cpu_milli,memory_mib,gpu,model\n",
			wantErr: "node list has no rows",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNodes(strings.NewReader(tc.csv))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParsePods(t *testing.T) {
	const full = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	tests := []struct {
		name    string
		csv     string
		want    []PodSpec
		wantErr string
	}{
		{
			name: "default trace columns",
			csv: full +
				"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n" +
				"openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n" +
				"openb-pod-0002,4000,8192,0,0,,BE,Succeeded,1,2,\n" +
				"openb-pod-0003,88000,327680,8,1000,V100M16|V100M32|V100M32,Burstable,Running,1,2,1\n",
			want: []PodSpec{
				{Name: "openb-pod-0000", MilliCPU: 12000, MemoryMiB: 16384, NumGPU: 1, GPUMilli: 1000},
				{Name: "openb-pod-0001", MilliCPU: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460},
				{Name: "openb-pod-0002", MilliCPU: 4000, MemoryMiB: 8192},
				// duplicates in gpu_spec are dropped
				{Name: "openb-pod-0003", MilliCPU: 88000, MemoryMiB: 327680, NumGPU: 8, GPUMilli: 1000, GPUSpec: []string{"V100M16", "V100M32"}},
			},
		},
		{
			name: "multigpu files lack gpu_spec and the time columns",
			csv:  "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,2,1000\n",
			want: []PodSpec{{Name: "openb-pod-0000", MilliCPU: 12000, MemoryMiB: 16384, NumGPU: 2, GPUMilli: 1000}},
		},
		{
			name: "blank lines are skipped",
			csv:  "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n\np,1,1,1,500\n\n",
			want: []PodSpec{{Name: "p", MilliCPU: 1, MemoryMiB: 1, NumGPU: 1, GPUMilli: 500}},
		},
		{
			name:    "gpu_milli over a card",
			csv:     full + "p,1,1,1,1500,,LS,Running,0,1,0\n",
			wantErr: "line 2, column gpu_milli: 1500 out of range 0..1000",
		},
		{
			name:    "gpu_milli without GPUs",
			csv:     full + "p,1,1,0,300,,LS,Running,0,1,0\n",
			wantErr: "line 2, column gpu_milli: 300 with num_gpu 0",
		},
		{
			name:    "GPUs without gpu_milli",
			csv:     full + "p,1,1,2,0,,LS,Running,0,1,0\n",
			wantErr: "line 2, column gpu_milli: 0 with num_gpu 2",
		},
		{
			name:    "empty number",
			csv:     full + "p,,1,1,10,,LS,Running,0,1,0\n",
			wantErr: "line 2, column cpu_milli: empty (want an integer)",
		},
		{
			name:    "missing required column",
			csv:     "name,cpu_milli,memory_mib,gpu_milli\np,1,1,1\n",
			wantErr: `header lacks column "num_gpu"`,
		},
		{
			name:    "empty name",
			csv:     full + ",1,1,1,10,,LS,Running,0,1,0\n",
			wantErr: "line 2, column name: empty pod name",
		},
		{
			name:    "duplicate pod",
			csv:     full + "p,1,1,1,10,,LS,Running,0,1,0\np,1,1,1,10,,LS,Running,0,1,0\n",
			wantErr: `line 3, column name: pod "p" already defined on line 2`,
		},
		{
			name:    "broken quoting is reported by the CSV reader with its line",
			csv:     full + "p,1,1,1,10,\"T4,LS\n",
			wantErr: "line 2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePods(strings.NewReader(tc.csv))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestParseSampleTraces reads the openb sample in testdata and checks it against what awk
// counts in the files: both pod formats (with gpu_spec and the time columns, and the
// multigpu files without them) and the node list.
func TestParseSampleTraces(t *testing.T) {
	type nodeTotals struct {
		Nodes                         int
		GPUMilli, MilliCPU, MemoryMiB int64
		GPUsByModel                   map[string]int
	}
	var gotNodes nodeTotals
	gotNodes.GPUsByModel = map[string]int{}
	for _, n := range sampleNodes(t) {
		gotNodes.Nodes++
		gotNodes.GPUMilli += n.GPUMilli()
		gotNodes.MilliCPU += n.MilliCPU
		gotNodes.MemoryMiB += n.MemoryMiB
		gotNodes.GPUsByModel[n.Model] += n.GPUs
	}
	wantNodes := nodeTotals{
		Nodes: 61, GPUMilli: 314000, MilliCPU: 5576000, MemoryMiB: 25862144,
		GPUsByModel: map[string]int{"G2": 232, "G3": 24, "P100": 10, "T4": 42, "V100M16": 6},
	}
	if diff := cmp.Diff(wantNodes, gotNodes); diff != "" {
		t.Errorf("sample nodes (-want,+got):\n%s", diff)
	}
	type podTotals struct {
		Pods, CPUOnly, MultiGPU, WithSpec int
		RequestMilli                      int64
	}
	for _, tc := range []struct {
		family string
		want   podTotals
	}{
		{"gpuspec25", podTotals{Pods: 300, CPUOnly: 38, MultiGPU: 7, WithSpec: 67, RequestMilli: 257800}},
		{"multigpu20", podTotals{Pods: 300, CPUOnly: 38, MultiGPU: 7, RequestMilli: 257800}},
	} {
		var got podTotals
		for _, p := range samplePods(t, tc.family) {
			got.Pods++
			got.RequestMilli += p.TotalGPUMilli()
			switch {
			case p.NumGPU == 0:
				got.CPUOnly++
			case p.NumGPU > 1:
				got.MultiGPU++
			}
			if len(p.GPUSpec) > 0 {
				got.WithSpec++
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s sample pods (-want,+got):\n%s", tc.family, diff)
		}
	}
}
