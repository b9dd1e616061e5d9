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
