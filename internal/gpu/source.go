// Package gpu is the exporter's NVML client: what the gpu and thermal
// collectors read from each device (internal/gpu/readings).
package gpu

import (
	"context"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

// Source reads every device within the context's deadline. An error means
// no complete reading this time (NVML absent, wedged or failing); the
// devices that were read are returned beside it.
type Source interface {
	Read(ctx context.Context) ([]readings.Reading, error)
}
