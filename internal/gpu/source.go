// Package gpu is the exporter's NVML client: what the gpu and thermal
// collectors read from each device (internal/gpu/readings).
package gpu

import (
	"context"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

// Source reads every device; with an error come the devices that were read.
type Source interface {
	Read(ctx context.Context) ([]readings.Reading, error)
}
