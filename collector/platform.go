package collector

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

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
	registerCollector("platform", defaultEnabled, func(fg FlagGroup) Factory {
		return func(env Env) (Collector, error) {
			return &platformCollector{fsys: sysfsDir(env.SysFS), logger: env.Logger}, nil
		}
	})
}

var (
	platformInfoDesc = newDesc("platform", "info",
		"The machine's DMI identity (/sys/class/dmi/id); never serial numbers or UUIDs. Always 1.",
		"vendor", "product_name", "board_name", "bios_version")
	// One help text for both: they are one metric family.
	platformTempHelp     = "Platform temperature sensors: source=acpi is a thermal zone by its ACPI name (zone is its index, as node_exporter labels it), thermal_zone a zone without an ACPI device (by its type), spbm the spbm driver's SoC sensors."
	platformZoneTempDesc = newDesc("platform", "temperature_celsius", platformTempHelp, "source", "sensor", "zone")
	platformTempDesc     = newDesc("platform", "temperature_celsius", platformTempHelp, "source", "sensor")
	platformPowerDesc    = newDesc("platform", "power_watts",
		"System power by rail, from the spbm driver; pl1, pl2, syspl1 and syspl2 are the smoothed power each firmware limit controller sees.", "rail")
	platformEnergyDesc = newDesc("platform", "energy_joules_total",
		"Energy by accumulator, from the spbm driver (a 32-bit firmware counter in mJ: it wraps).", "rail")
	platformLimitDesc = newDesc("platform", "power_limit_watts",
		"The effective firmware power limit (spbm powerN_cap) of the pl1, pl2, syspl1 and syspl2 controllers.", "limit")
	platformProchotDesc = newDesc("platform", "prochot",
		"1 while the SoC's PROCHOT (thermal emergency throttle) is asserted, from the spbm driver.")
	platformPLLevelDesc = newDesc("platform", "power_limit_level",
		"The firmware's current power-limit level (spbm pl_level), as the driver gives it.")
	platformUnreadableDesc = newDesc("platform", "unreadable_files",
		"sysfs files this scrape found but could not read or parse (permissions, a zone that errors on read, bad contents); their series are absent.")
	platformSupportedDesc = newDesc("platform", "field_supported",
		"1 when the host provides the source (spbm: the spbm hwmon driver; thermal_zones: a readable thermal zone; dmi: DMI identity), 0 when it does not (its series are then absent).", "field")
)

type platformCollector struct {
	fsys   platform.FS
	logger log.Logger
}

func (c *platformCollector) Update(ch chan<- prometheus.Metric) error {
	s := platform.Read(c.fsys)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
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
			ch <- prometheus.MustNewConstMetric(platformEnergyDesc, prometheus.CounterValue, r.Value, r.Name)
		}
		for _, r := range p.Limits {
			gauge(platformLimitDesc, r.Value, r.Name)
		}
		if p.Prochot != nil {
			gauge(platformProchotDesc, supported(*p.Prochot))
		}
		if p.PLLevel != nil {
			gauge(platformPLLevelDesc, float64(*p.PLLevel))
		}
	}
	gauge(platformUnreadableDesc, float64(len(s.Problems)))
	gauge(platformSupportedDesc, supported(s.SPBM != nil), "spbm")
	gauge(platformSupportedDesc, supported(len(s.Zones) > 0), "thermal_zones")
	gauge(platformSupportedDesc, supported(s.Identity != nil), "dmi")

	// Sysfs is full of files that refuse some readers; counted above,
	// named at debug level (relative to --path.sysfs).
	for _, p := range s.Problems {
		level.Debug(c.logger).Log("msg", "sysfs file unreadable", "file", p.File, "err", p.Err)
	}
	return nil
}

// maxSysFile bounds a sysfs read: an attribute is at most a page (4 KiB);
// anything larger is not one.
const maxSysFile = 64 << 10

// sysfsDir is the sysfs mount point as a platform.FS: names are relative to
// it, and errors name the file relative to it, never the mount point.
type sysfsDir string

func (d sysfsDir) ReadFile(name string) ([]byte, error) { return readSysFile(string(d), name) }

func (d sysfsDir) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	entries, err := os.ReadDir(filepath.Join(string(d), name))
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		pe.Path = name
	}
	return entries, err
}

// readSysFile reads the file rel under the sysfs mount point root, at most
// maxSysFile bytes. It is the one place the exporter reads /sys files.
func readSysFile(root, rel string) ([]byte, error) {
	if !fs.ValidPath(rel) {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fs.ErrInvalid}
	}
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: unwrapPath(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSysFile+1))
	switch {
	case err != nil:
		return nil, &fs.PathError{Op: "read", Path: rel, Err: unwrapPath(err)}
	case len(data) > maxSysFile:
		return nil, &fs.PathError{Op: "read", Path: rel, Err: fmt.Errorf("larger than %d KiB, not a sysfs attribute", maxSysFile>>10)}
	}
	return data, nil
}

func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}
