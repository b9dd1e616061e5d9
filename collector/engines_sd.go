package collector

import "github.com/spark-exporter/spark_exporter/internal/engine"

// EngineTargets are the inference engines the engines collector asks now:
// those the latest workloads scan found, joined with --engines.target. nil
// when the engines collector is off.
func (e *Exporter) EngineTargets() []engine.Target {
	c, ok := e.collectors["engines"].(*enginesCollector)
	if !ok {
		return nil
	}
	return c.Targets()
}

// ServesAt tells the engines collector the ports the exporter listens at,
// which it never asks: an answer of its own would start another round.
func (e *Exporter) ServesAt(ports []int) {
	if c, ok := e.collectors["engines"].(*enginesCollector); ok {
		c.mu.Lock()
		c.own = ports
		c.mu.Unlock()
	}
}
