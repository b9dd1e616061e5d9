package collector

// TEMPORARY — delete at merge. This stands in for acquireNVML, which the
// gpu collector's branch implements (one NVML client shared by the gpu and
// thermal collectors). Until that branch lands, the thermal collector gets
// a source whose every read fails, as on a host without NVML.

import (
	"context"
	"errors"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
)

type nvmlUnavailable struct{}

func (nvmlUnavailable) Read(context.Context) ([]gpu.Reading, error) {
	return nil, errors.New("NVML not available")
}

// acquireNVML returns the shared NVML source and the function that gives
// it back.
func acquireNVML(env Env) (src gpu.Source, release func(), err error) {
	return nvmlUnavailable{}, func() {}, nil
}
