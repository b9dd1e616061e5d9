// Package workload finds the programs that share the Spark's unified memory
// pool, inference servers and trainers, and groups processes into one
// workload per program.
//
// A command line is read, classified and dropped: no error or Problem
// carries any part of it, because command lines hold API keys (vllm serve
// --api-key …).
package workload

import (
	"path"
	"slices"
	"strings"
)

// Role is what a workload does with the pool.
type Role string

const (
	Inference Role = "inference"
	Training  Role = "training"
)

// Roles lists every role, so that a count of zero can be reported too.
var Roles = []Role{Inference, Training}

// Kinds of the programs recognised without user patterns.
const (
	KindVLLM       = "vllm"
	KindSGLang     = "sglang"
	KindOllama     = "ollama"
	KindLlamaCpp   = "llama_cpp"
	KindTGI        = "tgi"
	KindTRL        = "trl"
	KindAxolotl    = "axolotl"
	KindUnsloth    = "unsloth"
	KindAccelerate = "accelerate"
	KindTorchrun   = "torchrun"
	KindDeepSpeed  = "deepspeed"
)

// Command is a process as the classifier sees it: its arguments (from
// /proc/PID/cmdline) and its kernel command name (comm, at most 15 bytes).
type Command struct {
	Argv []string
	Comm string
}

// Identity is what a command line says a process is.
type Identity struct {
	Role Role
	Kind string
	Cap  Cap
}

// identify tells whether cmd is a workload and which. User patterns come
// first, so that they can correct a built-in rule. A process with no
// arguments (a kernel thread, a zombie) is never a workload.
func identify(cmd Command, patterns []Pattern) (Identity, bool) {
	if len(cmd.Argv) == 0 {
		return Identity{}, false
	}
	if len(patterns) > 0 {
		line := strings.Join(cmd.Argv, " ")
		for _, p := range patterns {
			if p.re.MatchString(line) {
				return Identity{Role: p.Role, Kind: p.Kind, Cap: capOf(p.Kind, cmd.Argv)}, true
			}
		}
	}
	inv := parseInvocation(cmd.Argv)
	if r, ok := matchInvocation(inv); ok {
		if r.launcher {
			if target, ok := launchedTrainer(inv.args); ok {
				r = target
			}
		}
		return Identity{Role: r.role, Kind: r.kind, Cap: capOf(r.kind, cmd.Argv)}, true
	}
	// Children that rename themselves (setproctitle) keep nothing of their
	// parent's command line: vLLM's show "VLLM::EngineCore" (comm
	// "VLLM::EngineCor"), SGLang's "sglang::scheduler". Their cap is on the
	// parent's command line and is not guessed.
	for _, t := range titles {
		if strings.HasPrefix(cmd.Argv[0], t.prefix) || strings.HasPrefix(cmd.Comm, t.prefix) {
			return Identity{Role: t.role, Kind: t.kind, Cap: Cap{Problem: ProblemCapNotOnCommandLine}}, true
		}
	}
	return Identity{}, false
}

// rule recognises a program by executable or script basename, or by module.
type rule struct {
	name string
	// prefix: name matches any module beginning with it.
	prefix bool
	// only, if set, lists the first arguments (subcommands) accepted.
	only []string
	// except lists those refused.
	except []string
	role   Role
	kind   string
	// launcher: the program starts another (accelerate launch, torchrun,
	// deepspeed), whose kind is reported when it is a known trainer.
	launcher bool
}

func (r rule) accepts(name string, args []string) bool {
	if name != r.name && !(r.prefix && strings.HasPrefix(name, r.name)) {
		return false
	}
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	if r.only != nil && !slices.Contains(r.only, sub) {
		return false
	}
	return !slices.Contains(r.except, sub)
}

var (
	vllmServe = []string{"serve", "run-batch"}
	// Subcommands of the TRL CLI that train nothing.
	trlNotTraining = []string{"env", "chat", "vllm-serve", "-h", "--help", ""}
)

// programs are matched against the executable's basename, or the script's
// when the executable is a Python interpreter (console scripts such as
// `vllm` run as `python3 /…/bin/vllm serve …`).
var programs = []rule{
	{name: "vllm", only: vllmServe, role: Inference, kind: KindVLLM},
	{name: "sglang", only: []string{"serve"}, role: Inference, kind: KindSGLang},
	// `ollama run` is a client; the server and its model runners hold the
	// memory. Runners were a separate binary before Ollama 0.5.
	{name: "ollama", only: []string{"serve", "start", "runner"}, role: Inference, kind: KindOllama},
	{name: "ollama_llama_server", role: Inference, kind: KindOllama},
	{name: "llama-server", role: Inference, kind: KindLlamaCpp},
	{name: "text-generation-launcher", role: Inference, kind: KindTGI},
	{name: "text-generation-server", only: []string{"serve"}, role: Inference, kind: KindTGI},
	// `trl vllm-serve` is a vLLM server for GRPO, with vLLM's cap flag.
	{name: "trl", only: []string{"vllm-serve"}, role: Inference, kind: KindVLLM},
	{name: "trl", except: trlNotTraining, role: Training, kind: KindTRL},
	{name: "axolotl", only: []string{"train"}, role: Training, kind: KindAxolotl},
	{name: "unsloth", role: Training, kind: KindUnsloth},
	{name: "unsloth-cli.py", role: Training, kind: KindUnsloth},
	{name: "accelerate", only: []string{"launch"}, role: Training, kind: KindAccelerate, launcher: true},
	{name: "torchrun", role: Training, kind: KindTorchrun, launcher: true},
	{name: "deepspeed", role: Training, kind: KindDeepSpeed, launcher: true},
}

// modules are matched against `python -m MODULE`.
var modules = []rule{
	{name: "vllm.entrypoints.openai.api_server", role: Inference, kind: KindVLLM},
	{name: "vllm.entrypoints.api_server", role: Inference, kind: KindVLLM},
	{name: "vllm.entrypoints.openai.run_batch", role: Inference, kind: KindVLLM},
	{name: "vllm.entrypoints.cli.main", only: vllmServe, role: Inference, kind: KindVLLM},
	{name: "sglang.launch_server", role: Inference, kind: KindSGLang},
	{name: "llama_cpp.server", role: Inference, kind: KindLlamaCpp},
	{name: "text_generation_server.cli", only: []string{"serve"}, role: Inference, kind: KindTGI},
	{name: "trl.scripts.vllm_serve", role: Inference, kind: KindVLLM},
	{name: "trl.cli", only: []string{"vllm-serve"}, role: Inference, kind: KindVLLM},
	{name: "trl.cli", except: trlNotTraining, role: Training, kind: KindTRL},
	{name: "trl.scripts.", prefix: true, role: Training, kind: KindTRL},
	{name: "axolotl.cli.train", role: Training, kind: KindAxolotl},
	{name: "axolotl.cli.main", only: []string{"train"}, role: Training, kind: KindAxolotl},
	{name: "unsloth_cli", role: Training, kind: KindUnsloth},
	{name: "accelerate.commands.launch", role: Training, kind: KindAccelerate, launcher: true},
	{name: "accelerate.commands.accelerate_cli", only: []string{"launch"}, role: Training, kind: KindAccelerate, launcher: true},
	{name: "torch.distributed.run", role: Training, kind: KindTorchrun, launcher: true},
	{name: "torch.distributed.launch", role: Training, kind: KindTorchrun, launcher: true},
	{name: "deepspeed.launcher.runner", role: Training, kind: KindDeepSpeed, launcher: true},
	{name: "deepspeed.launcher.launch", role: Training, kind: KindDeepSpeed, launcher: true},
}

var titles = []struct {
	prefix string
	role   Role
	kind   string
}{
	{"VLLM::", Inference, KindVLLM},
	{"sglang::", Inference, KindSGLang},
}

func matchInvocation(inv invocation) (rule, bool) {
	if inv.module != "" {
		return matchRules(modules, inv.module, inv.args)
	}
	return matchRules(programs, inv.program, inv.args)
}

func matchRules(rules []rule, name string, args []string) (rule, bool) {
	for _, r := range rules {
		if r.accepts(name, args) {
			return r, true
		}
	}
	return rule{}, false
}

// launchedTrainer finds a trainer in a launcher's arguments: `accelerate
// launch -m axolotl.cli.train cfg.yml` (axolotl's documented form),
// `torchrun … -m trl.scripts.sft`, `accelerate launch /…/bin/trl sft`.
func launchedTrainer(args []string) (rule, bool) {
	for i, a := range args {
		var r rule
		var ok bool
		if (a == "-m" || a == "--module") && i+1 < len(args) {
			r, ok = matchRules(modules, args[i+1], args[i+2:])
		} else {
			r, ok = matchRules(programs, path.Base(a), args[i+1:])
		}
		if ok && r.role == Training && !r.launcher {
			return r, true
		}
	}
	return rule{}, false
}

type invocation struct {
	program string
	module  string
	args    []string
}

// parseInvocation sees through a Python interpreter to the script or module
// it runs, skipping the interpreter's own options (python3 -u -X dev -m …).
func parseInvocation(argv []string) invocation {
	exe := path.Base(argv[0])
	if !isPython(exe) {
		return invocation{program: exe, args: argv[1:]}
	}
	rest := argv[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			if i+1 < len(rest) {
				return invocation{program: path.Base(rest[i+1]), args: rest[i+2:]}
			}
			return invocation{program: exe}
		case a == "-" || !strings.HasPrefix(a, "-"):
			// A script (or "-": standard input).
			return invocation{program: path.Base(a), args: rest[i+1:]}
		case strings.HasPrefix(a, "--"):
			if a == "--check-hash-based-pycs" {
				i++
			}
		default:
			// A cluster of short options, such as -u, -OO, -Bm, -Xdev.
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'm', 'c':
					value, next := a[j+1:], i+1
					if value == "" && next < len(rest) {
						value, next = rest[next], next+1
					}
					if a[j] == 'c' || value == "" {
						// Inline code: nothing to recognise.
						return invocation{program: exe}
					}
					return invocation{module: value, args: rest[next:]}
				case 'W', 'X':
					if j == len(a)-1 {
						i++ // the option's value is the next argument
					}
					j = len(a)
				}
			}
		}
	}
	return invocation{program: exe}
}

// isPython: python, python3, python3.12.
func isPython(name string) bool {
	rest, ok := strings.CutPrefix(name, "python")
	return ok && strings.Trim(rest, "0123456789.") == ""
}
