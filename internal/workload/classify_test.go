package workload

import (
	"strings"
	"testing"
)

func flagCap(r float64) Cap { return Cap{Ratio: r, Source: CapFlag} }
func defaultCap() Cap       { return Cap{Ratio: 0.9, Source: CapDefault} }

func TestClassify(t *testing.T) {
	const venv = "/home/spark/.venv/bin/"
	for _, tc := range []struct {
		name string
		cmd  string // arguments separated by NUL-like "|", for readability
		comm string
		want *Identity // nil: not a workload
	}{
		// vLLM in its forms.
		{"vllm serve, console script through the interpreter", venv + "python3|" + venv + "vllm|serve|Qwen/Qwen3-32B|--gpu-memory-utilization|0.4", "vllm",
			&Identity{Inference, KindVLLM, flagCap(0.4)}},
		{"vllm serve, flag=value", "vllm|serve|m|--gpu-memory-utilization=0.35", "vllm", &Identity{Inference, KindVLLM, flagCap(0.35)}},
		{"vllm serve, underscore spelling", "vllm|serve|m|--gpu_memory_utilization=0.5", "vllm", &Identity{Inference, KindVLLM, flagCap(0.5)}},
		{"vllm serve, no flag: vLLM's default", "vllm|serve|m", "vllm", &Identity{Inference, KindVLLM, defaultCap()}},
		{"vllm serve, last flag wins", "vllm|serve|m|--gpu-memory-utilization|0.9|--gpu-memory-utilization=0.3", "vllm", &Identity{Inference, KindVLLM, flagCap(0.3)}},
		{"vllm run-batch", "vllm|run-batch|-i|in.jsonl|-o|out.jsonl|--model|m", "vllm", &Identity{Inference, KindVLLM, defaultCap()}},
		{"python -m openai api_server", "/usr/bin/python3|-m|vllm.entrypoints.openai.api_server|--model|m|--gpu-memory-utilization|0.45", "python3",
			&Identity{Inference, KindVLLM, flagCap(0.45)}},
		{"python -u -m api_server", "python3.12|-u|-X|dev|-m|vllm.entrypoints.openai.api_server|--model|m", "python3.12", &Identity{Inference, KindVLLM, defaultCap()}},
		{"python -Bm cluster", "python|-Bmvllm.entrypoints.api_server|--model|m", "python", &Identity{Inference, KindVLLM, defaultCap()}},
		{"vllm cli module", "python3|-m|vllm.entrypoints.cli.main|serve|m", "python3", &Identity{Inference, KindVLLM, defaultCap()}},
		{"engine core by title", "VLLM::EngineCore", "VLLM::EngineCor", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotOnCommandLine}}},
		{"worker by comm alone", "python3|-c|from multiprocessing.spawn import spawn_main; spawn_main()|--multiprocessing-fork", "VLLM::Worker_TP",
			&Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotOnCommandLine}}},
		{"vllm client commands are not servers", "vllm|chat|--url|http://localhost:8000", "vllm", nil},
		{"vllm bench is a client", "vllm|bench|serve|--model|m", "vllm", nil},
		{"bad cap: no series", "vllm|serve|m|--gpu-memory-utilization|lots", "vllm", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotANumber}}},
		{"cap above 1", "vllm|serve|m|--gpu-memory-utilization=1.5", "vllm", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotANumber}}},
		{"cap of 0", "vllm|serve|m|--gpu-memory-utilization=0", "vllm", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotANumber}}},
		{"cap NaN", "vllm|serve|m|--gpu-memory-utilization=NaN", "vllm", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotANumber}}},
		{"flag without a value", "vllm|serve|m|--gpu-memory-utilization", "vllm", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapNotANumber}}},
		{"cap of exactly 1", "vllm|serve|m|--gpu-memory-utilization=1", "vllm", &Identity{Inference, KindVLLM, flagCap(1)}},
		{"cap may be in a config file", "vllm|serve|--config|serve.yaml", "vllm", &Identity{Inference, KindVLLM, Cap{Problem: ProblemCapInConfigFile}}},
		{"flag beats a config file", "vllm|serve|--config=serve.yaml|--gpu-memory-utilization|0.5", "vllm", &Identity{Inference, KindVLLM, flagCap(0.5)}},
		{"a flag after -- is an argument", "vllm|serve|m|--|--gpu-memory-utilization|0.2", "vllm", &Identity{Inference, KindVLLM, defaultCap()}},
		{"trl vllm-serve", "python3|/usr/local/bin/trl|vllm-serve|--model|m|--gpu_memory_utilization|0.3", "trl", &Identity{Inference, KindVLLM, flagCap(0.3)}},

		// SGLang.
		{"sglang launch_server", "python3|-m|sglang.launch_server|--model-path|m|--mem-fraction-static|0.5", "python3", &Identity{Inference, KindSGLang, flagCap(0.5)}},
		{"sglang default", "python3|-m|sglang.launch_server|--model-path|m", "python3", &Identity{Inference, KindSGLang, defaultCap()}},
		{"sglang serve", "sglang|serve|--model-path|m|--mem-fraction-static=0.6", "sglang", &Identity{Inference, KindSGLang, flagCap(0.6)}},
		{"sglang scheduler by title", "sglang::scheduler", "sglang::schedul", &Identity{Inference, KindSGLang, Cap{Problem: ProblemCapNotOnCommandLine}}},

		// Programs without a cap.
		{"ollama serve", "/usr/local/bin/ollama|serve", "ollama", &Identity{Inference, KindOllama, Cap{}}},
		{"ollama runner", "/usr/local/bin/ollama|runner|--model|/usr/share/ollama/.ollama/models/blobs/sha256-x|--port|41235", "ollama", &Identity{Inference, KindOllama, Cap{}}},
		{"old ollama runner", "/tmp/ollama123/runners/cuda_v12/ollama_llama_server|--model|x", "ollama_llama_se", &Identity{Inference, KindOllama, Cap{}}},
		{"ollama run is a client", "ollama|run|llama3", "ollama", nil},
		{"llama-server", "/opt/llama.cpp/build/bin/llama-server|-m|model.gguf|-ngl|99", "llama-server", &Identity{Inference, KindLlamaCpp, Cap{}}},
		{"llama-cpp-python server", "python3|-m|llama_cpp.server|--model|m.gguf", "python3", &Identity{Inference, KindLlamaCpp, Cap{}}},
		{"tgi launcher", "text-generation-launcher|--model-id|m", "text-generation", &Identity{Inference, KindTGI, Cap{}}},
		{"tgi shard", "/opt/conda/bin/python3.11|/opt/conda/bin/text-generation-server|serve|m", "text-generation", &Identity{Inference, KindTGI, Cap{}}},
		{"tgi weight download is no server", "/opt/conda/bin/python3.11|/opt/conda/bin/text-generation-server|download-weights|m", "text-generation", nil},

		// Trainers.
		{"trl sft", "python3|/usr/local/bin/trl|sft|--model_name_or_path|m", "trl", &Identity{Training, KindTRL, Cap{}}},
		{"trl module", "python3|-m|trl.scripts.dpo|--model_name_or_path|m", "python3", &Identity{Training, KindTRL, Cap{}}},
		{"trl env trains nothing", "trl|env", "trl", nil},
		{"axolotl train", "axolotl|train|cfg.yml", "axolotl", &Identity{Training, KindAxolotl, Cap{}}},
		{"axolotl preprocess trains nothing", "axolotl|preprocess|cfg.yml", "axolotl", nil},
		{"axolotl module", "python|-m|axolotl.cli.train|cfg.yml", "python", &Identity{Training, KindAxolotl, Cap{}}},
		{"unsloth cli", "python3|unsloth-cli.py|--model_name|m", "python3", &Identity{Training, KindUnsloth, Cap{}}},
		{"torchrun", "/usr/bin/python3|/usr/local/bin/torchrun|--nproc_per_node|1|train.py", "torchrun", &Identity{Training, KindTorchrun, Cap{}}},
		{"torch.distributed.run", "python3|-m|torch.distributed.run|train.py", "python3", &Identity{Training, KindTorchrun, Cap{}}},
		{"deepspeed", "python3|/usr/local/bin/deepspeed|train.py|--deepspeed|ds.json", "deepspeed", &Identity{Training, KindDeepSpeed, Cap{}}},
		{"accelerate launch", "accelerate|launch|train.py", "accelerate", &Identity{Training, KindAccelerate, Cap{}}},
		{"accelerate config trains nothing", "accelerate|config", "accelerate", nil},
		{"accelerate launching axolotl", "python3|/usr/local/bin/accelerate|launch|--num_processes|1|-m|axolotl.cli.train|cfg.yml", "accelerate",
			&Identity{Training, KindAxolotl, Cap{}}},
		{"accelerate launching the trl script", "accelerate|launch|--config_file|fsdp.yaml|/usr/local/bin/trl|sft|--model_name_or_path|m", "accelerate",
			&Identity{Training, KindTRL, Cap{}}},
		{"torchrun launching a trl module", "torchrun|--nproc_per_node|1|-m|trl.scripts.sft", "torchrun", &Identity{Training, KindTRL, Cap{}}},

		// Not workloads.
		{"a shell", "-bash", "bash", nil},
		{"grep for vllm", "grep|-E|vllm|ollama|trl|axolotl", "grep", nil},
		{"python script", "python3|train.py", "python3", nil},
		{"inline python", "python3|-c|import vllm", "python3", nil},
		{"python alone", "python3", "python3", nil},
		{"python -m with no module", "python3|-m", "python3", nil},
		{"python -W without value", "python3|-W", "python3", nil},
		{"no arguments (kernel thread, zombie)", "", "kworker/0:1", nil},
		{"an editor on a vllm file", "vim|vllm", "vim", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var argv []string
			if tc.cmd != "" {
				argv = strings.Split(tc.cmd, "|")
			}
			got, ok := identify(Command{Argv: argv, Comm: tc.comm}, nil)
			switch {
			case tc.want == nil && ok:
				t.Errorf("classified as %+v, want no workload", got)
			case tc.want != nil && !ok:
				t.Errorf("not a workload, want %+v", *tc.want)
			case tc.want != nil && got != *tc.want:
				t.Errorf("got %+v, want %+v", got, *tc.want)
			}
		})
	}
}

func TestUserPatterns(t *testing.T) {
	patterns := mustPatterns(t,
		"training:finetune:^python3 .*/finetune\\.py",
		// A wrapper around vLLM: its cap is read as vLLM's.
		"inference:vllm:^/opt/serve-wrapper ",
		// Reclassifies what a built-in rule says.
		"inference:my_ollama:ollama serve",
	)
	for _, tc := range []struct {
		cmd  string
		want *Identity
	}{
		{"python3|/home/spark/finetune.py|--lr|1e-4", &Identity{Training, "finetune", Cap{}}},
		{"/opt/serve-wrapper|--gpu-memory-utilization|0.25", &Identity{Inference, KindVLLM, flagCap(0.25)}},
		{"/opt/serve-wrapper|m", &Identity{Inference, KindVLLM, defaultCap()}},
		{"/usr/local/bin/ollama|serve", &Identity{Inference, "my_ollama", Cap{}}},
		// Built-in rules still apply to what no pattern matches.
		{"vllm|serve|m", &Identity{Inference, KindVLLM, defaultCap()}},
		{"python3|/home/spark/evaluate.py", nil},
	} {
		got, ok := identify(Command{Argv: strings.Split(tc.cmd, "|")}, patterns)
		if tc.want == nil {
			if ok {
				t.Errorf("%s: classified as %+v, want no workload", tc.cmd, got)
			}
			continue
		}
		if !ok || got != *tc.want {
			t.Errorf("%s: got %+v (%v), want %+v", tc.cmd, got, ok, *tc.want)
		}
	}
}

func mustPatterns(t testing.TB, specs ...string) []Pattern {
	t.Helper()
	var ps []Pattern
	for _, s := range specs {
		p, err := ParsePattern(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string // empty: valid
	}{
		{"training:trainer:train\\.py", ""},
		{"inference:my_server:serve --port [0-9]+:8080", ""}, // colons in the regex are its own
		{"training:trainer", "want role:kind:regex"},
		{"nonsense", "want role:kind:regex"},
		{"serving:x:y", "role must be inference or training"},
		{"Training:x:y", "role must be inference or training"},
		{"training:My-Kind:y", "kind must be lower-case"},
		{"training:/usr/bin/x:y", "kind must be lower-case"},
		{"training::y", "kind must be lower-case"},
		{"training:x:", "regular expression is empty"},
		{"training:x:(unclosed", "bad regular expression"},
	} {
		_, err := ParsePattern(tc.in)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.wantErr)
		}
	}
}

// The classifier must not panic on any command line, and must say only
// what its rules allow: a known role, a kind fit for a label, a cap in
// (0, 1] or none, and a problem only from the fixed list.
func FuzzClassify(f *testing.F) {
	for _, seed := range []string{
		"vllm\x00serve\x00m\x00--gpu-memory-utilization\x000.4",
		"python3\x00-m\x00sglang.launch_server\x00--mem-fraction-static=0.5",
		"python3\x00-Bm",
		"python3\x00-W",
		"python3\x00--check-hash-based-pycs",
		"accelerate\x00launch\x00-m",
		"accelerate\x00launch\x00--module\x00trl.scripts.sft",
		"VLLM::EngineCore\x00\x00\x00",
		"vllm\x00serve\x00--gpu-memory-utilization",
		"",
	} {
		f.Add([]byte(seed), "python3")
	}
	patterns := mustPatterns(f, "training:custom:^python3 train")
	problems := map[string]bool{"": true, ProblemCapNotANumber: true, ProblemCapInConfigFile: true, ProblemCapNotOnCommandLine: true}
	f.Fuzz(func(t *testing.T, cmdline []byte, comm string) {
		id, ok := identify(Command{Argv: splitCmdline(cmdline), Comm: comm}, patterns)
		if !ok {
			return
		}
		if id.Role != Inference && id.Role != Training {
			t.Errorf("role %q", id.Role)
		}
		if !kindName.MatchString(id.Kind) {
			t.Errorf("kind %q is not fit for a label", id.Kind)
		}
		c := id.Cap
		switch c.Source {
		case "":
			if c.Ratio != 0 {
				t.Errorf("no cap source but ratio %v", c.Ratio)
			}
		case CapFlag, CapDefault:
			if !(c.Ratio > 0 && c.Ratio <= 1) || c.Problem != "" {
				t.Errorf("cap %+v", c)
			}
		default:
			t.Errorf("cap source %q", c.Source)
		}
		if !problems[c.Problem] {
			t.Errorf("problem %q is not one of the fixed texts", c.Problem)
		}
	})
}

// FuzzParsePattern: no --workloads.match value panics; one accepted is
// split where the text says and gives a role and a kind fit for labels.
func FuzzParsePattern(f *testing.F) {
	f.Add("training:trainer:train\\.py")
	f.Add("inference:my_server:serve --port [0-9]+:8080")
	f.Add("training:x:(unclosed")
	f.Add("::")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			return
		}
		if p.Role != Inference && p.Role != Training {
			t.Errorf("role %q", p.Role)
		}
		if !kindName.MatchString(p.Kind) {
			t.Errorf("kind %q is not fit for a label", p.Kind)
		}
		if want := string(p.Role) + ":" + p.Kind + ":"; !strings.HasPrefix(s, want) {
			t.Errorf("%q parsed as %s…", s, want)
		}
	})
}
