package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/redact"
	"github.com/spark-exporter/spark_exporter/internal/report"
)

// defaultFlightFile is where the .deb's unit keeps the flight ring.
const defaultFlightFile = "/var/lib/prometheus-spark-exporter/flight"

type reportFlightFlags struct {
	on      *bool
	boot    *int
	bootSet *bool
}

func addReportFlightFlags(cmd *kingpin.CmdClause) reportFlightFlags {
	set := new(bool)
	return reportFlightFlags{bootSet: set,
		on: cmd.Flag("flight", "Report from the flight recorder's file (the log argument; default "+defaultFlightFile+"): "+
			"the minutes before a boot ended, or --from/--to.").Bool(),
		boot: cliflag.Int(cmd.Flag("boot", "With --flight: the boot to report, 0 the running one, -1 the one before "+
			"(default: -1 when it ended without a clean shutdown, else 0).").PlaceHolder("-1").IsSetByUser(set), -1<<20, 0),
	}
}

const flightWindow = 10 * time.Minute

// reportFlight exits 1 where the file could not be read, 2 on bad input.
func reportFlight(app *kingpin.Application, f reportFlightFlags, file string, from, to time.Time, last time.Duration,
	zone *time.Location, asJSON bool, svgFile string, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
		return code
	}
	if file == "" {
		file = defaultFlightFile
	}
	if zone == nil {
		zone = time.Local
	}
	fl, err := flight.OpenFile(file)
	if err != nil {
		return fail(reportFailed, fmt.Errorf("the flight file: %w", redact.WithoutPath(err)))
	}
	defer fl.Close()
	if len(fl.Boots()) == 0 {
		return fail(reportFailed, errors.New("the flight file holds no record"))
	}
	boot, want, err := pickBoot(fl.Boots(), currentBoot(app), f)
	if err != nil {
		return fail(reportUsage, err)
	}
	window := flightWindow
	if last > 0 {
		window = last
	}
	keep := boot.Since(window)
	if !from.IsZero() || !to.IsZero() {
		keep = func(t time.Time) bool { return (from.IsZero() || !t.Before(from)) && (to.IsZero() || !t.After(to)) }
	}
	s := report.NewFlight(boot, want, fl.Damaged(), zone)
	if err := fl.Each(boot, keep, s.Add); err != nil {
		return fail(reportFailed, fmt.Errorf("the flight file: %w", redact.WithoutPath(err)))
	}
	if s.Records() == 0 {
		return fail(reportUsage, errors.New("--from/--to: no record of that boot in that range"))
	}
	if asJSON {
		err = s.WriteJSON(stdout)
	} else {
		err = s.WriteText(stdout)
	}
	if err == nil && svgFile != "" {
		var b bytes.Buffer
		if err = s.WriteSVG(&b); err == nil {
			err = os.WriteFile(filepath.Clean(svgFile), b.Bytes(), 0o644)
		}
	}
	if err != nil {
		return fail(reportFailed, redact.WithoutPath(err))
	}
	return reportMade
}

// pickBoot: the file's last boot is 0 when it is the running one, -1 otherwise
// (read after a reboot, before the exporter started, or on another machine).
func pickBoot(boots []flight.Boot, current [16]byte, f reportFlightFlags) (flight.Boot, int, error) {
	lastIndex := -1
	if boots[len(boots)-1].ID == current {
		lastIndex = 0
	}
	at := func(index int) int { return len(boots) - 1 + index - lastIndex }
	want := *f.boot
	if !*f.bootSet {
		want = lastIndex
		if p := at(-1); p >= 0 && p < len(boots) && !boots[p].Clean() {
			want = -1
		}
	}
	i := at(want)
	if want > 0 || i < 0 || i >= len(boots) {
		return flight.Boot{}, 0, fmt.Errorf("--boot=%d: the file holds boots %d to %d", want, lastIndex-len(boots)+1, lastIndex)
	}
	return boots[i], want, nil
}

// currentBoot is the running kernel's boot id, under --path.procfs.
func currentBoot(app *kingpin.Application) [16]byte {
	procfs := "/proc"
	for _, m := range app.Model().Flags {
		if m.Name == "path.procfs" {
			procfs = m.Value.String()
		}
	}
	data, err := hostfs.New(procfs).ReadFile("sys/kernel/random/boot_id", nil)
	if err != nil {
		return [16]byte{}
	}
	return flight.ParseBootID(data)
}
