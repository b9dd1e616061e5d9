#!/usr/bin/env bash
# Counts what one iteration of a benchmark costs, in figures that a busy
# machine cannot blur: user-space instructions (valgrind's callgrind) and
# system calls (strace), each per iteration. The benchmark runs twice, N and
# 2N iterations; the difference over N leaves out the set-up.
#
#   scripts/bench-counts.sh ./cmd/spark_exporter 'Scrape/default$' [N]
#
# Instructions count user space only: the kernel's work in a system call
# shows in the system call count instead. Both run with GOMAXPROCS=1: under
# valgrind, which runs one thread at a time, idle Go threads spinning for
# work would count billions of instructions. Go's asynchronous preemption
# is turned off, since callgrind cannot follow its signals, and so is the
# runtime's use of RDTSCP, which some valgrind builds cannot decode (SIGILL).
set -euo pipefail
pkg=$1 bench=$2 n=${3:-100}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go test -c -o "$work/bench.test" "$pkg"
# The stand-in NVML built beforehand: a benchmark that builds it runs the C
# compiler as a child, whose signal callgrind cannot follow.
make -s nvml-standin >/dev/null
export SPARK_TEST_NVML="${SPARK_TEST_NVML:-$PWD/.build/nvml/libnvidia-ml.so.1}"
dir=$(go list -f '{{.Dir}}' "$pkg")

run() { # tool iterations output
  local tool=$1 iters=$2 out=$3
  (cd "$dir" && case $tool in
    callgrind) GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$out" \
                 "$work/bench.test" -test.run='^$' -test.bench="$bench" -test.benchtime="${iters}x" >/dev/null 2>&1 ;;
    strace)    GOMAXPROCS=1 strace -f -c -o "$out" \
                 "$work/bench.test" -test.run='^$' -test.bench="$bench" -test.benchtime="${iters}x" >/dev/null 2>&1 ;;
  esac)
}
instructions() { grep -m1 '^summary:' "$1" | awk '{print $2}'; }
# The Go runtime's own calls (sysmon's sleeps, scheduling, preemption
# signals) are left out: strace slows the program down, and they grow with
# its run time rather than with the work measured.
runtime='^(nanosleep|futex|epoll_pwait|epoll_wait|tgkill|getpid|gettid|rt_sigreturn|rt_sigprocmask|sched_yield|clock_gettime|madvise|mmap|munmap)$'
# strace -c rows: % time, seconds, usecs/call, calls, [errors,] syscall.
percall() { awk -v rt="$runtime" 'NR > 2 && $1 !~ /^-/ && $NF != "total" && $NF !~ rt {print $NF, $4}' "$1" | sort; }

run callgrind "$n" "$work/cg1"; run callgrind $((2 * n)) "$work/cg2"
run strace "$n" "$work/st1"; run strace $((2 * n)) "$work/st2"
awk -v a="$(instructions "$work/cg1")" -v b="$(instructions "$work/cg2")" -v n="$n" \
  'BEGIN { printf "instructions/op %.0f\n", (b - a) / n }'
join -a 2 -e 0 -o 0,1.2,2.2 <(percall "$work/st1") <(percall "$work/st2") |
  awk -v n="$n" '{ d = ($3 - $2) / n; total += d; if (d >= 0.05) line[$1] = d }
    END { printf "syscalls/op %.1f (the Go runtime'"'"'s own left out)\n", total
          for (c in line) printf "  %-16s %.1f\n", c, line[c] }'

