package workload

// Node is a process in the tree: its parent and whether it was classified
// as a workload on its own.
type Node struct {
	PID, PPID int
	Matched   bool
}

// ownerPIDs returns, for each node, the pid of its topmost matched ancestor,
// itself included, or 0: a vLLM server's engine core and a torchrun's
// workers are one workload with their launcher, and unmatched children hold
// its memory too. Processes come and go while the tree is read, so a parent
// may be missing or, with reused pids, the links may loop.
func ownerPIDs(nodes []Node) []int {
	const (
		unvisited = -1
		visiting  = -2
	)
	index := make(map[int]int, len(nodes))
	for i, n := range nodes {
		index[n.PID] = i
	}
	owner := make([]int, len(nodes))
	for i := range owner {
		owner[i] = unvisited
	}
	var path []int
	for i := range nodes {
		// Climb until a node whose owner is known, a missing parent or a
		// loop, then settle the owners on the way back down.
		path = path[:0]
		cur, ok := i, true
		for ok && owner[cur] == unvisited {
			owner[cur] = visiting
			path = append(path, cur)
			cur, ok = index[nodes[cur].PPID]
		}
		above := 0
		if ok && owner[cur] > 0 {
			above = owner[cur]
		}
		for j := len(path) - 1; j >= 0; j-- {
			n := path[j]
			if above == 0 && nodes[n].Matched {
				above = nodes[n].PID
			}
			owner[n] = above
		}
	}
	return owner
}
