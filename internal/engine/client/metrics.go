package client

import (
	"github.com/spark-exporter/spark_exporter/internal/engine"

	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// figure's names are read first found first.
type figure struct {
	names []string
	// ratio: the largest over the label sets (a KV cache per engine core); otherwise their sum.
	ratio bool
	set   func(r *engine.Reading, v float64)
}

// figures by kind: vLLM's kv_cache_usage_perc is 0–1 despite its name;
// SGLang's retractions are its preemptions (num_retracted_reqs is a gauge);
// recent llama.cpp drops kv_cache_usage_ratio and preempts nothing.
var figures = map[string][]figure{
	engine.KindVLLM: {
		{names: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, ratio: true, set: func(r *engine.Reading, v float64) { r.KVCacheUsage = &v }},
		{names: []string{"vllm:num_requests_running"}, set: func(r *engine.Reading, v float64) { r.Running = &v }},
		{names: []string{"vllm:num_requests_waiting"}, set: func(r *engine.Reading, v float64) { r.Waiting = &v }},
		{names: []string{"vllm:num_preemptions_total"}, set: func(r *engine.Reading, v float64) { r.Preemptions = &v }},
		{names: []string{"vllm:prompt_tokens_total"}, set: func(r *engine.Reading, v float64) { r.PromptTokens = &v }},
		{names: []string{"vllm:generation_tokens_total"}, set: func(r *engine.Reading, v float64) { r.GenTokens = &v }},
	},
	engine.KindSGLang: {
		{names: []string{"sglang:token_usage"}, ratio: true, set: func(r *engine.Reading, v float64) { r.KVCacheUsage = &v }},
		{names: []string{"sglang:num_running_reqs"}, set: func(r *engine.Reading, v float64) { r.Running = &v }},
		{names: []string{"sglang:num_queue_reqs"}, set: func(r *engine.Reading, v float64) { r.Waiting = &v }},
		{names: []string{"sglang:num_retracted_requests_total"}, set: func(r *engine.Reading, v float64) { r.Preemptions = &v }},
		{names: []string{"sglang:prompt_tokens_total"}, set: func(r *engine.Reading, v float64) { r.PromptTokens = &v }},
		{names: []string{"sglang:generation_tokens_total"}, set: func(r *engine.Reading, v float64) { r.GenTokens = &v }},
	},
	engine.KindLlamaCpp: {
		{names: []string{"llamacpp:kv_cache_usage_ratio"}, ratio: true, set: func(r *engine.Reading, v float64) { r.KVCacheUsage = &v }},
		{names: []string{"llamacpp:requests_processing"}, set: func(r *engine.Reading, v float64) { r.Running = &v }},
		{names: []string{"llamacpp:requests_deferred"}, set: func(r *engine.Reading, v float64) { r.Waiting = &v }},
		{names: []string{"llamacpp:prompt_tokens_total"}, set: func(r *engine.Reading, v float64) { r.PromptTokens = &v }},
		{names: []string{"llamacpp:tokens_predicted_total"}, set: func(r *engine.Reading, v float64) { r.GenTokens = &v }},
	},
}

// maxSeries: an engine has one sample per model and engine core. More is
// refused whole, not summed in part; so are more than maxKept bytes.
const maxSeries = 1000

const (
	maxKept = 256 << 10
	maxLine = 64 << 10
)

var (
	errTooManySeries = fmt.Errorf("more than %d series or %d KiB of the metrics read", maxSeries, maxKept>>10)
	errLongLine      = fmt.Errorf("a line longer than %d KiB", maxLine>>10)
)

// parseMetrics reads an engine's /metrics text into r; only the lines of the
// names read reach expfmt's parser.
func parseMetrics(kind string, body io.Reader, r *engine.Reading) error {
	figs, ok := figures[kind]
	if !ok {
		return fmt.Errorf("no metrics are read from engines of kind %q", kind)
	}
	wanted := map[string]bool{}
	for _, f := range figs {
		for _, n := range f.names {
			wanted[n] = true
		}
	}
	kept, err := keepLines(body, wanted)
	if err != nil {
		return err
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(kept))
	if err != nil {
		// The parser's message quotes the engine's text: say only where.
		var pe expfmt.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("malformed metrics text at line %d of the lines read", pe.Line)
		}
		return errors.New("malformed metrics text")
	}
	for _, f := range figs {
		for _, name := range f.names {
			mf, ok := families[name]
			if !ok || len(mf.GetMetric()) == 0 {
				continue
			}
			v, ok := combine(mf.GetMetric(), f.ratio)
			if ok {
				f.set(r, v)
			}
			break
		}
	}
	return nil
}

// keepLines ends each line kept by "\n" alone: "\r\n" (text pasted through a web page) ends one too.
func keepLines(body io.Reader, wanted map[string]bool) ([]byte, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4<<10), maxLine)
	var out []byte
	series := 0
	for sc.Scan() {
		line := sc.Bytes()
		name, sample := lineName(line)
		if name == "" || !wanted[name] {
			continue
		}
		if sample {
			series++
		}
		if series > maxSeries || len(out)+len(line) >= maxKept {
			return nil, errTooManySeries
		}
		out = append(append(out, line...), '\n')
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil, errLongLine
	}
	return out, sc.Err()
}

// lineName is a sample's name, or that of a HELP or TYPE comment; sample tells which.
func lineName(line []byte) (name string, sample bool) {
	line = bytes.TrimLeft(line, " \t")
	if len(line) == 0 {
		return "", false
	}
	if line[0] == '#' {
		fields := bytes.Fields(line[1:])
		if len(fields) >= 2 && (string(fields[0]) == "HELP" || string(fields[0]) == "TYPE") {
			return string(fields[1]), false
		}
		return "", false
	}
	end := bytes.IndexAny(line, "{ \t\r\n")
	if end < 0 {
		end = len(line)
	}
	return string(line[:end]), true
}

// combine: a value that is not finite, or a ratio outside 0–1, is no reading.
func combine(ms []*dto.Metric, ratio bool) (float64, bool) {
	var out float64
	for i, m := range ms {
		v, ok := value(m)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (ratio && v > 1) {
			return 0, false
		}
		if ratio {
			if i == 0 || v > out {
				out = v
			}
		} else {
			out += v
		}
	}
	return out, !math.IsInf(out, 0)
}

func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}
