package workload

import (
	"slices"
	"testing"
)

func TestOwners(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  []int
	}{
		{
			name: "server with children, trainer beside it, unrelated shell",
			nodes: []Node{
				{PID: 1, PPID: 0},
				{PID: 1987, PPID: 1},
				{PID: 2101, PPID: 1987, Matched: true}, // vllm serve
				{PID: 2140, PPID: 2101, Matched: true}, // VLLM::EngineCore
				{PID: 2141, PPID: 2101},                // resource tracker
				{PID: 2301, PPID: 1987, Matched: true}, // accelerate launch
				{PID: 2302, PPID: 2301, Matched: true}, // python -m trl.scripts.sft
				{PID: 2400, PPID: 1987},                // htop
			},
			want: []int{0, 0, 2101, 2101, 2101, 2301, 2301, 0},
		},
		{
			name: "children listed before their parents",
			nodes: []Node{
				{PID: 12, PPID: 11},
				{PID: 11, PPID: 10, Matched: true},
				{PID: 10, PPID: 1, Matched: true},
				{PID: 1, PPID: 0},
			},
			want: []int{10, 10, 10, 0},
		},
		{
			name: "an unmatched process between two matched ones",
			nodes: []Node{
				{PID: 10, PPID: 1, Matched: true}, // torchrun
				{PID: 11, PPID: 10},               // python train.py
				{PID: 12, PPID: 11, Matched: true},
			},
			want: []int{10, 10, 10},
		},
		{
			name: "parent exited mid-scan: the child stands alone",
			nodes: []Node{
				{PID: 20, PPID: 19, Matched: true},
				{PID: 21, PPID: 20},
			},
			want: []int{20, 20},
		},
		{
			name: "links that loop (reused pids) end the climb",
			nodes: []Node{
				{PID: 30, PPID: 31},
				{PID: 31, PPID: 30, Matched: true},
				{PID: 32, PPID: 32, Matched: true},
			},
			want: []int{31, 31, 32},
		},
		{name: "empty", nodes: nil, want: []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownerPIDs(tc.nodes); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
