package collector

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/engine/client"
)

// The engines collector reads the inference engines' own account (KV cache,
// requests, preemptions, tokens; Ollama's loaded models) beside the pool's.
// Engines are asked in the background: a scrape starts a round and renders
// the latest answers, so that a slow engine never slows a scrape (its
// answer shows at the next).
func init() {
	registerCollector("engines", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		targets := cliflag.List(fg.Flag("engines.target",
			"An engine's metrics address, KIND=HOST:PORT on loopback (KIND vllm, sglang, llama_cpp or ollama), to add, "+
				"or to override the port of an engine found (one started without --port, an Ollama with OLLAMA_HOST); repeatable. "+
				"Example: ollama=127.0.0.1:11500"), parseEngineTarget)
		tokenFile := fg.Flag("engines.bearer-token-file",
			"A file holding the key (bearer token) for engines that ask for one (vLLM --api-key); never read from a process.").
			Default("").String()
		return func(env Env) (Collector, error) {
			token := ""
			if *tokenFile != "" {
				data, err := readTokenFile(*tokenFile)
				if err != nil {
					return nil, err
				}
				token = data
			}
			found := env.Engines
			if found == nil {
				found = engine.NewDirectory()
			}
			c := newEnginesCollector(found, *targets, client.NewAsker(token), env.Logger)
			c.results, c.own = env.Results, env.OwnPorts
			c.start()
			return c, nil
		}
	})
}

func parseEngineTarget(s string) (engine.Static, error) {
	kind, address, ok := strings.Cut(s, "=")
	if !ok || !slices.Contains(engine.Kinds, kind) {
		return engine.Static{}, fmt.Errorf("want KIND=HOST:PORT with KIND one of %s", strings.Join(engine.Kinds, ", "))
	}
	if err := client.CheckAddress(address); err != nil {
		return engine.Static{}, err
	}
	return engine.Static{Kind: kind, Address: address}, nil
}

// readTokenFile reads a key: one line, at most 4 kB. The error names the
// flag, never the file's content.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--engines.bearer-token-file: cannot read the file")
	}
	token := strings.TrimSpace(string(data))
	if token == "" || len(token) > 4096 || strings.ContainsAny(token, "\r\n") {
		return "", fmt.Errorf("--engines.bearer-token-file: the file must hold one key on one line")
	}
	return token, nil
}

var (
	engineUpDesc = newDesc("spark_engine_up",
		"1 when the inference engine answered its metrics endpoint (Ollama: /api/ps) at the latest round.", "pid", "kind", "address")
	engineKVCacheDesc = newDesc("spark_engine_kv_cache_usage_ratio",
		"The engine's KV cache in use, 0–1 (vLLM kv_cache_usage_perc, SGLang token_usage, llama.cpp kv_cache_usage_ratio).", "pid", "kind", "address")
	engineRequestsDesc = newDesc("spark_engine_requests",
		"Requests the engine holds, by state (running, waiting).", "pid", "kind", "address", "state")
	enginePreemptionsDesc = newDesc("spark_engine_preemptions_total",
		"Requests the engine preempted since it started: their KV cache was lost and is computed again.", "pid", "kind", "address")
	engineTokensDesc = newDesc("spark_engine_tokens_total",
		"Tokens the engine processed since it started, by tokens (prompt, generation).", "pid", "kind", "address", "tokens")
	engineModelBytesDesc = newDesc("spark_engine_model_bytes",
		"Ollama: a loaded model's size in memory (/api/ps size).", "pid", "kind", "address", "model")
	engineModelUnloadDesc = newDesc("spark_engine_model_unload_seconds",
		"Ollama: seconds left of a loaded model's keep-alive, after which Ollama unloads it (0 when due).", "pid", "kind", "address", "model")
)

type enginesCollector struct {
	found   *engine.Directory
	static  []engine.Static
	asker   *client.Asker
	logger  log.Logger
	results *collected.Results

	// own are the exporter's ports, never asked: an answer of its own
	// would start another round.
	own []int

	kick chan struct{}
	stop chan struct{}
	done chan struct{} // nil until start

	mu       sync.Mutex
	asked    []engine.Target
	readings []engine.Reading
	// told: the problem each engine was last logged with, so that it is
	// logged once, and again only when it changes.
	told   map[engineKey]string
	models map[engineKey]engine.ModelNames
}

type engineKey struct {
	pid           int
	kind, address string
}

func newEnginesCollector(found *engine.Directory, static []engine.Static, asker *client.Asker, logger log.Logger) *enginesCollector {
	c := &enginesCollector{found: found, static: static, asker: asker, logger: logger,
		kick: make(chan struct{}, 1), stop: make(chan struct{}),
		told: map[engineKey]string{}, models: map[engineKey]engine.ModelNames{}}
	return c
}

// start asks the engines in the background, once per Update, until Close.
func (c *enginesCollector) start() {
	c.done = make(chan struct{})
	go c.loop()
}

// loop asks the engines once per kick; kicks during a round make one more.
func (c *enginesCollector) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
			c.round()
		}
	}
}

// Targets are the engines a round asks now.
func (c *enginesCollector) Targets() []engine.Target {
	return engine.Resolve(c.found.Targets(), c.static, c.own)
}

// round asks every engine at once, each under its deadline.
func (c *enginesCollector) round() {
	targets := c.Targets()
	readings := make([]engine.Reading, len(targets))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	now := time.Now()
	for i, t := range targets {
		wg.Go(func() { readings[i] = c.asker.Ask(ctx, t, now) })
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[engineKey]bool{}
	for i := range readings {
		r := &readings[i]
		key := engineKey{r.PID, r.Kind, r.Address}
		seen[key] = true
		if c.models[key] == nil {
			c.models[key] = engine.ModelNames{}
		}
		c.models[key].Keep(r, now)
		c.tell(key, *r)
	}
	for key := range c.told {
		if !seen[key] {
			delete(c.told, key)
			delete(c.models, key)
		}
	}
	c.asked, c.readings = targets, readings
}

// tell logs an engine's problem once, and again only when it changes.
func (c *enginesCollector) tell(key engineKey, r engine.Reading) {
	if r.Problem != c.told[key] {
		if r.Problem != "" {
			level.Warn(c.logger).Log("msg", "an inference engine's metrics are not read; logged again when this changes",
				"pid", r.PID, "kind", r.Kind, "address", r.Address, "reason", r.Problem)
		} else {
			level.Info(c.logger).Log("msg", "an inference engine's metrics are read", "pid", r.PID, "kind", r.Kind, "address", r.Address)
		}
	}
	c.told[key] = r.Problem
	if r.ModelsLeftOut > 0 {
		level.Debug(c.logger).Log("msg", "models left out: a name that cannot be a label, or past the cap", "pid", r.PID, "count", r.ModelsLeftOut)
	}
}

// Update starts a round and renders the latest one's answers.
func (c *enginesCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	select {
	case c.kick <- struct{}{}:
	default: // a round is already due
	}
	c.mu.Lock()
	asked, readings := c.asked, c.readings
	c.mu.Unlock()
	if readings == nil {
		readings = []engine.Reading{}
	}
	c.results.Set(func(st *collected.State) { st.Engines, st.EngineTargets = readings, asked })
	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, r := range readings {
		pid := ""
		if r.PID != 0 {
			pid = strconv.Itoa(r.PID)
		}
		gauge(engineUpDesc, boolToFloat64(r.Up), pid, r.Kind, r.Address)
		if !r.Up {
			continue
		}
		if r.KVCacheUsage != nil {
			gauge(engineKVCacheDesc, *r.KVCacheUsage, pid, r.Kind, r.Address)
		}
		if r.Running != nil {
			gauge(engineRequestsDesc, *r.Running, pid, r.Kind, r.Address, "running")
		}
		if r.Waiting != nil {
			gauge(engineRequestsDesc, *r.Waiting, pid, r.Kind, r.Address, "waiting")
		}
		if r.Preemptions != nil {
			counter(enginePreemptionsDesc, *r.Preemptions, pid, r.Kind, r.Address)
		}
		if r.PromptTokens != nil {
			counter(engineTokensDesc, *r.PromptTokens, pid, r.Kind, r.Address, "prompt")
		}
		if r.GenTokens != nil {
			counter(engineTokensDesc, *r.GenTokens, pid, r.Kind, r.Address, "generation")
		}
		names := map[string]bool{}
		for _, m := range r.Models {
			if names[m.Name] {
				continue // the same model twice: the first answer counts
			}
			names[m.Name] = true
			gauge(engineModelBytesDesc, m.Bytes, pid, r.Kind, r.Address, m.Name)
			gauge(engineModelUnloadDesc, m.UnloadSeconds(now), pid, r.Kind, r.Address, m.Name)
		}
	}
	return nil
}

// Close stops the background asker, ending a round under way.
func (c *enginesCollector) Close() error {
	close(c.stop)
	if c.done != nil {
		<-c.done
	}
	c.asker.Close()
	return nil
}
