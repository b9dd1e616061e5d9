package engine

import (
	"slices"
	"sync"
)

// Directory is the engines the workloads collector found at its latest scan,
// which the engines collector asks and /sd/engines lists; concurrency-safe.
type Directory struct {
	mu      sync.Mutex
	targets []Target
}

// NewDirectory is an empty directory.
func NewDirectory() *Directory { return &Directory{} }

// Set replaces the engines found.
func (d *Directory) Set(targets []Target) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.targets = slices.Clone(targets)
}

// Targets is a copy of the engines found.
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

// MaxTargets bounds the engines asked in one round: a Spark runs one or two.
const MaxTargets = 16

// Resolve joins the engines found with the --engines.target ones. A static
// target is the found engine of its kind at its port; failing that, the one
// of its kind on the program's default port (it may listen where its
// command line does not say: OLLAMA_HOST, a config file); failing that, an
// engine with no process (PID 0). At most MaxTargets are returned, by PID.
func Resolve(found []Target, static []Static) []Target {
	out := slices.Clone(found)
	for _, s := range static {
		_, port := splitPort(s.Address)
		i := slices.IndexFunc(out, func(t Target) bool {
			_, p := splitPort(t.Address)
			return t.Kind == s.Kind && p == port
		})
		if i < 0 {
			var defaults []int
			for j, t := range out {
				if t.Kind == s.Kind && t.DefaultPort {
					defaults = append(defaults, j)
				}
			}
			if len(defaults) == 1 {
				i = defaults[0]
			}
		}
		if i >= 0 {
			out[i].Address, out[i].DefaultPort = s.Address, false
			continue
		}
		out = append(out, Target{Kind: s.Kind, Address: s.Address})
	}
	slices.SortStableFunc(out, func(a, b Target) int { return a.PID - b.PID })
	return out[:min(len(out), MaxTargets)]
}

func splitPort(address string) (host, port string) {
	for i := len(address) - 1; i >= 0; i-- {
		if address[i] == ':' {
			return address[:i], address[i+1:]
		}
	}
	return address, ""
}
