package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/layout"
	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// sysfs reads the sysfs mount point in batches (a layout.FS each): names
// are relative to it and so are the files errors name, never the mount
// point. Every file is bounded by the size of a sysfs attribute. The value
// files a scrape's batch reads are held open for the next (hostfs.Holding).
type sysfs struct{ fs hostfs.FS }

func newSysfs(root string) *sysfs {
	return &sysfs{fs: hostfs.New(root).Sysfs().Holding()}
}

// batch runs job with its reads under ctx's deadline, a collector run's. A
// read that does not answer in time fails the batch, naming its file; job's
// results are then not to be used, since job may still be running.
func (d *sysfs) batch(ctx context.Context, job func(fsys layout.FS)) error {
	return d.relative("", d.fs.WithContext(ctx).Batch(func(r *hostfs.Reader) error {
		job(&batchReader{r: r, sys: d})
		return nil
	}))
}

// relative makes the path of an *fs.PathError name, or, for a read that
// blocked (whose error names the file the batch was reading), that file
// relative to the mount point.
func (d *sysfs) relative(name string, err error) error {
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok {
		return err
	}
	if errors.Is(err, hostfs.ErrBlocked) {
		rel, relErr := filepath.Rel(d.fs.Path("."), pe.Path)
		if relErr != nil || strings.HasPrefix(rel, "..") {
			return redact.WithoutPath(err)
		}
		name = filepath.ToSlash(rel)
	}
	return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
}

// batchReader reads within a batch. What ReadFile returns is valid until
// the next call: the parsers are done with it by then.
type batchReader struct {
	r   *hostfs.Reader
	sys *sysfs
	buf []byte
}

func (b *batchReader) ReadFile(name string) ([]byte, error) {
	data, err := b.r.ReadFile(name, b.buf)
	if err == nil {
		b.buf = data
	}
	return data, b.sys.relative(name, err)
}

func (b *batchReader) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := b.r.ReadDir(name)
	return entries, b.sys.relative(name, err)
}

// layoutSeries are the series of one sysfs layout, each built (its labels
// checked, paired and sorted) the first time it is sent: until the next
// discovery a scrape sets only their values.
type layoutSeries map[seriesKey]*series

type seriesKey struct {
	desc   *prometheus.Desc
	labels [4]string
}

type series struct {
	desc   *prometheus.Desc
	kind   prometheus.ValueType
	labels []*dto.LabelPair
}

func (m layoutSeries) send(ch chan<- prometheus.Metric, d *prometheus.Desc, kind prometheus.ValueType, v float64, labels ...string) {
	k := seriesKey{desc: d}
	if len(labels) > len(k.labels) {
		ch <- prometheus.MustNewConstMetric(d, kind, v, slices.Clone(labels)...)
		return
	}
	copy(k.labels[:], labels)
	s := m[k]
	if s == nil {
		c := prometheus.MustNewConstMetric(d, kind, v, slices.Clone(labels)...)
		var out dto.Metric
		if err := c.Write(&out); err != nil {
			panic(err) // a const metric's Write does not fail
		}
		s = &series{desc: d, kind: kind, labels: out.Label}
		m[k] = s
	}
	ch <- valued{s, v}
}

type valued struct {
	*series
	value float64
}

func (s valued) Desc() *prometheus.Desc { return s.desc }

func (s valued) Write(out *dto.Metric) error {
	out.Label = s.labels
	v := s.value
	if s.kind == prometheus.CounterValue {
		out.Counter = &dto.Counter{Value: &v}
	} else {
		out.Gauge = &dto.Gauge{Value: &v}
	}
	return nil
}

// sysfsOutcome is a sysfs collector's error for a read that failed or
// blocked (nothing after a blocked file was read: the next may block as
// long). Files that refused their reader, common in sysfs, are counted in
// a metric and named here at debug level, relative to --path.sysfs.
func sysfsOutcome(logger log.Logger, err error, blocked *layout.Problem, problems []layout.Problem) error {
	if err == nil && blocked != nil {
		err = blocked
	}
	if err != nil {
		return fmt.Errorf("reading sysfs: %w", err)
	}
	for _, p := range problems {
		level.Debug(logger).Log("msg", "sysfs file unreadable", "file", p.File, "err", p.Err)
	}
	return nil
}
