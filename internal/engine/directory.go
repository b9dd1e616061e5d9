package engine

import (
	"net"
	"slices"
	"strconv"
	"sync"
)

// Directory is the engines the workloads collector found at its latest scan,
// which the engines collector asks and /sd/engines lists; concurrency-safe.
type Directory struct {
	mu      sync.Mutex
	targets []Target
}

func NewDirectory() *Directory { return &Directory{} }

func (d *Directory) Set(targets []Target) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.targets = slices.Clone(targets)
}

func (d *Directory) Targets() []Target {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.targets)
}

// Static is an --engines.target: an engine's kind and address.
type Static struct {
	Kind    string
	Address string
}

// maxTargets: a Spark runs one or two engines.
const maxTargets = 16

// Resolve joins the engines found with the --engines.target ones, static first;
// then each user's first engine before any user's second, so that a crowd one
// user starts cannot push another's past maxTargets. An address is asked once,
// never at a port of own (the exporter's).
func Resolve(found []Target, static []Static, own []int) []Target {
	asked := map[string]bool{}
	skip := func(address string) bool { return asked[address] || slices.Contains(own, port(address)) }
	joined := map[int]bool{}
	var out []Target
	for _, s := range static {
		if skip(s.Address) {
			continue
		}
		asked[s.Address] = true
		t := Target{Kind: s.Kind, Address: s.Address, Named: true, UID: -1}
		if i := holder(found, s); i >= 0 && !joined[i] {
			joined[i] = true
			t.PID, t.UID, t.Container, t.Listens = found[i].PID, found[i].UID, found[i].Container, found[i].Listens
		}
		out = append(out, t)
	}
	var rest []Target
	for i, t := range found {
		if !joined[i] && t.Address != "" && !skip(t.Address) {
			asked[t.Address] = true
			rest = append(rest, t)
		}
	}
	out = append(out, fair(rest)...)
	return out[:min(len(out), maxTargets)]
}

// holder is the engine of s's kind listening at s's port, or -1.
func holder(found []Target, s Static) int {
	p := port(s.Address)
	return slices.IndexFunc(found, func(t Target) bool {
		return t.Kind == s.Kind && slices.ContainsFunc(t.Listens, func(a string) bool { return port(a) == p })
	})
}

// fair orders engines by their rank among their user's, then by PID.
func fair(ts []Target) []Target {
	slices.SortStableFunc(ts, func(a, b Target) int { return a.PID - b.PID })
	type ranked struct {
		t    Target
		rank int
	}
	rs := make([]ranked, len(ts))
	seen := map[int]int{}
	for i, t := range ts {
		rs[i] = ranked{t, seen[t.UID]}
		seen[t.UID]++
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return a.rank - b.rank })
	for i, r := range rs {
		ts[i] = r.t
	}
	return ts
}

func port(address string) int {
	_, p, err := net.SplitHostPort(address)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}
