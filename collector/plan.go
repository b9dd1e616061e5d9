package collector

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/plan"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
)

// The plan collector exports what each planned training run in --plan.file
// would need from the pool at its peak (load transient included), so that an
// alert can say when the pool can no longer take it: an inference server
// grew, or the page cache filled. It is off until a file is given; the file
// is read once, at start, and a bad one stops the exporter there.
func init() {
	registerConfiguredCollector("plan", "plan.file", func(fg cliflag.FlagGroup) Factory {
		file := fg.Flag("plan.file",
			"YAML list of planned training runs, each with a name and the fields of the plan command's flags (see `plan --help`). Turns on the plan collector.").
			PlaceHolder("FILE").String()
		return func(env Env) (Collector, error) {
			if *file == "" {
				return nil, errors.New("needs --plan.file, the list of planned runs")
			}
			plans, err := plan.LoadFile(*file)
			if err != nil {
				return nil, fmt.Errorf("--plan.file: %w", err)
			}
			c, err := newPlanCollector(plans)
			if c != nil {
				c.results = env.Results
			}
			return c, err
		}
	})
}

var planRequiredDesc = prometheus.NewDesc(
	"spark_plan_required_bytes",
	"Peak pool need of a planned run (load transient included), from the accounting worksheet; plan is the name given in --plan.file.",
	[]string{"plan"}, nil)

// planCollector holds each plan's peak, worked out once: plans change only
// with the file, which is read at start.
type planCollector struct {
	plans   []collected.Plan
	results *collected.Results
}

func newPlanCollector(plans []plan.Named) (*planCollector, error) {
	c := &planCollector{}
	for _, p := range plans {
		e, err := p.Plan.Estimate()
		if err != nil {
			return nil, fmt.Errorf("--plan.file: plan %s: %w", p.Name, err)
		}
		c.plans = append(c.plans, collected.Plan{Name: p.Name, PeakBytes: e.Peak})
	}
	if c.plans == nil {
		c.plans = []collected.Plan{} // on, with no plan: not nil
	}
	return c, nil
}

func (c *planCollector) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	c.results.Set(func(st *collected.State) { st.Plans = c.plans })
	for _, p := range c.plans {
		ch <- prometheus.MustNewConstMetric(planRequiredDesc, prometheus.GaugeValue, p.PeakBytes, p.Name)
	}
	return nil
}
