package collector

import (
	"context"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/layout"
	"github.com/spark-exporter/spark_exporter/internal/platform"
)

// The platform collector reports what the DGX Spark tells beyond NVML, from
// sysfs: the DMI identity (firmware level matters: several GB10 power and
// telemetry problems change with BIOS updates), the ACPI thermal zones by
// their ACPI names, and, with the community spbm hwmon driver, the system
// power rails, energy, SoC temperatures and the firmware power limits that
// can hold a run while nvidia-smi shows nothing. A host that is not a
// Spark gets what its files say.
func init() {
	registerCollector("platform", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		return func(env Env) (Collector, error) {
			return newPlatformCollector(env.SysFS, env.Logger), nil
		}
	})
}

var (
	platformInfoDesc = newDesc("spark_platform_info",
		"The machine's DMI identity (/sys/class/dmi/id); never serial numbers or UUIDs. Always 1.",
		"vendor", "product_name", "board_name", "bios_version")
	// One help text for both: they are one metric family.
	platformTempHelp     = "Platform temperature sensors: source=acpi is a thermal zone by its ACPI name (zone is its index, as node_exporter labels it), thermal_zone a zone without an ACPI device (by its type), spbm the spbm driver's SoC sensors."
	platformZoneTempDesc = newDesc("spark_platform_temperature_celsius", platformTempHelp, "source", "sensor", "zone")
	platformTempDesc     = newDesc("spark_platform_temperature_celsius", platformTempHelp, "source", "sensor")
	platformPowerDesc    = newDesc("spark_platform_power_watts",
		"System power by rail, from the spbm driver; pl1, pl2, syspl1 and syspl2 are the smoothed power each firmware limit controller sees.", "rail")
	platformEnergyDesc = newDesc("spark_platform_energy_joules_total",
		"Energy by accumulator, from the spbm driver (a 32-bit firmware counter in mJ: it wraps).", "rail")
	platformLimitDesc = newDesc("spark_platform_power_limit_watts",
		"The effective firmware power limit (spbm powerN_cap) of the pl1, pl2, syspl1 and syspl2 controllers.", "limit")
	platformProchotDesc = newDesc("spark_platform_prochot",
		"1 while the SoC's PROCHOT (thermal emergency throttle) is asserted, from the spbm driver.")
	platformPLLevelDesc = newDesc("spark_platform_power_limit_level",
		"The firmware's current power-limit level (spbm pl_level), as the driver gives it.")
	platformUnreadableDesc = newDesc("spark_platform_unreadable_files",
		"sysfs files this scrape found but could not read or parse (permissions, a zone that errors on read, bad contents); their series are absent.")
	platformSupportedDesc = newDesc("spark_platform_field_supported",
		"1 when the host provides the source (spbm: the spbm hwmon driver; thermal_zones: a readable thermal zone; dmi: DMI identity), 0 when it does not (its series are then absent).", "field")
)

type platformCollector struct {
	batch  func(ctx context.Context, job func(fsys layout.FS)) error
	close  func() error // closes the files batch holds open
	now    func() time.Time
	logger log.Logger
	// A host with thousands of zones or channels is read up to
	// maxEntriesPerScrape value files.
	entryCap

	mu     sync.Mutex // held through an Update: the series are built as sent
	layout layout.Kept[platformLayout]
}

type platformLayout struct {
	*platform.Layout
	series layoutSeries
}

func newPlatformCollector(root string, logger log.Logger) *platformCollector {
	sys := newSysfs(root)
	return &platformCollector{batch: sys.batch, close: sys.fs.Close, now: time.Now, logger: logger}
}

func (c *platformCollector) Close() error {
	if c.close == nil {
		return nil
	}
	return c.close()
}

// read reads the values of the layout discovered at most layout.Every ago.
func (c *platformCollector) read(ctx context.Context) (platform.Snapshot, layoutSeries, error) {
	var err error
	l := c.layout.Get(c.now(), func() *platformLayout {
		var d *platform.Layout
		if err = c.batch(ctx, func(fsys layout.FS) { d = platform.DiscoverAtMost(fsys, maxEntriesPerScrape) }); err != nil {
			return nil
		}
		if n, first := d.LeftOut(); n > 0 {
			level.Debug(c.logger).Log("msg", "sysfs entries left out beyond the cap", "cap", maxEntriesPerScrape,
				"left_out", n, "first", first)
		}
		return &platformLayout{d, layoutSeries{}}
	})
	if err != nil {
		return platform.Snapshot{}, nil, err
	}
	n, _ := l.LeftOut()
	c.set(n)
	var s platform.Snapshot
	if err := c.batch(ctx, func(fsys layout.FS) { s = l.Read(fsys.ReadFile) }); err != nil {
		c.layout.Forget()
		return platform.Snapshot{}, nil, err
	}
	if s.Stale || s.Blocked != nil {
		// A file of the layout went (a driver unloaded): this scrape
		// reports what is left; the next one discovers afresh.
		c.layout.Forget()
	}
	return s, l.series, nil
}

// take reads the layout's files and logs those unreadable; c.mu held.
func (c *platformCollector) take(ctx context.Context) (platform.Snapshot, layoutSeries, error) {
	s, series, err := c.read(ctx)
	if err := sysfsOutcome(c.logger, err, s.Blocked, s.Problems); err != nil {
		return s, nil, err
	}
	return s, series, nil
}

func (c *platformCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	defer c.send(ch, "platform")
	c.mu.Lock()
	defer c.mu.Unlock()
	s, series, err := c.take(ctx)
	if err != nil {
		return err
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		series.send(ch, d, prometheus.GaugeValue, v, labels...)
	}

	if id := s.Identity; id != nil {
		gauge(platformInfoDesc, 1, id.Vendor, id.ProductName, id.BoardName, id.BIOSVersion)
	}
	for _, z := range s.Zones {
		gauge(platformZoneTempDesc, z.Celsius, z.Source, z.Sensor, z.Zone)
	}
	if p := s.SPBM; p != nil {
		for _, r := range p.Temps {
			gauge(platformTempDesc, r.Value, "spbm", r.Name)
		}
		for _, r := range p.Power {
			gauge(platformPowerDesc, r.Value, r.Name)
		}
		for _, r := range p.Energy {
			series.send(ch, platformEnergyDesc, prometheus.CounterValue, r.Value, r.Name)
		}
		for _, r := range p.Limits {
			gauge(platformLimitDesc, r.Value, r.Name)
		}
		if p.Prochot != nil {
			gauge(platformProchotDesc, boolToFloat64(*p.Prochot))
		}
		if p.PLLevel != nil {
			gauge(platformPLLevelDesc, float64(*p.PLLevel))
		}
	}
	gauge(platformUnreadableDesc, float64(len(s.Problems)))
	gauge(platformSupportedDesc, boolToFloat64(s.SPBM != nil), "spbm")
	gauge(platformSupportedDesc, boolToFloat64(len(s.Zones) > 0), "thermal_zones")
	gauge(platformSupportedDesc, boolToFloat64(s.Identity != nil), "dmi")
	return nil
}
