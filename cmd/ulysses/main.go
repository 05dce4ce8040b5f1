// Command ulysses shows the machine's GPUs and runs, checks and times the
// Ulysses collectives (SendRecvHeads, GatherHeads, AllGather) on them.
//
// Usage:
//
//	ulysses info [--json]
//	ulysses check [--world N] [--ranks-per-gpu K] [--dtypes bf16,fp8] [--seed S]
//	              [--wire exact|e4m3|e5m2]
//	ulysses bench [--world N] [--ranks-per-gpu K] [--batch B] [--heads H] [--head-dim D]
//	              [--bytes 128K,1M,8M,32M,128M] [--dtypes bf16,fp8]
//	              [--ops send_recv_heads,gather_heads,all_gather]
//	              [--warmup W] [--iters I] [--rotate R] [--sms 0|8,16,32,64,0]
//	              [--wires exact,e4m3] [--json FILE] [--compare nccl]
//	ulysses help [command]
//
// info prints the CUDA driver, every GPU, which GPUs can access each other's
// memory, and the kernels embedded in the binary (--json: the same as JSON).
//
// check runs every collective on shapes taken from public model configs
// (scaled to at most 64 MiB per tensor, heads rounded down to a multiple of
// the world size, uneven token counts, one rank with no tokens) and compares
// every output with the CPU reference, byte for byte. It prints PASS or FAIL
// per case and rank, then "check: N passed, M failed"; it exits 0 only when
// every rank passed every case. --wire e4m3 or e5m2 checks the lossy fp8
// wire (bf16 and fp16 only) against the reference's rows rounded through fp8.
//
// bench times the collectives with device events, per dtype, SM count and
// per-rank size, and prints the median (the slowest rank's), the spread, the
// algorithmic bandwidth and the time over the NVLink floor (the bytes that
// must cross NVLink over the measured one-way peer copy rate). --compare nccl
// also runs bench/nccl_bench.py (PyTorch + NCCL) on the same shapes and
// prints NCCL's time next to ulysses'. --wires exact,e4m3 times every row
// over each wire, side by side (a "wire" column; the NVLink bytes and floor
// of an fp8 row count its codes and scales).
//
// Exit status: 0 success; 1 a check or benchmark failed; 2 bad usage (every
// flag is checked before the driver is loaded); 3 no CUDA driver or no GPU.
//
// check and bench start one process per rank (this same executable, as the
// hidden subcommand "worker"), rank r on GPU r modulo the number of GPUs;
// by default one rank per GPU (--ranks-per-gpu to share GPUs, --world to set
// the number of ranks outright).
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one visible subcommand.
type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) int
	usage         func(w io.Writer) // the command's flags
}

func commands() []command {
	return []command{
		{"info", "show the CUDA driver, the GPUs, peer access and the embedded kernels", infoMain, func(w io.Writer) { fs, _ := newInfoFlags(); usageOf(fs, w) }},
		{"check", "run the collectives on every GPU and compare them with the CPU reference", checkMain, func(w io.Writer) { fs, _ := newCheckFlags(); usageOf(fs, w) }},
		{"bench", "time the collectives (and, with --compare nccl, PyTorch + NCCL)", benchMain, func(w io.Writer) { fs, _ := newBenchFlags(false); usageOf(fs, w) }},
		{"plot", "draw a bench --json file as SVG or PNG figures", plotMain, func(w io.Writer) { fs, _ := newPlotFlags(); usageOf(fs, w) }},
	}
}

// run is the whole program: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return helpMain(rest, stdout, stderr)
	case "worker":
		return workerMain(rest, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(rest, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "ulysses: unknown command %q\n", name)
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ulysses <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-6s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-6s %s\n", "help", "show this list, or a command's flags (ulysses help <command>)")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "exit status: 0 success, %d a check or benchmark failed, %d bad usage (every flag is\nchecked before the driver loads), %d no CUDA driver or no GPU\n", exitFailed, exitUsage, exitNoGPU)
}

func helpMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			c.usage(stdout)
			return 0
		}
	}
	fmt.Fprintf(stderr, "ulysses: help: unknown command %q\n", args[0])
	usage(stderr)
	return exitUsage
}

// workerMain is one rank of check or bench, started by the parent through
// internal/launch; it is not listed in the help.
func workerMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "ulysses: worker: want check or bench")
		return exitUsage
	}
	switch args[0] {
	case "check":
		return checkWorker(args[1:], stdout, stderr)
	case "bench":
		return benchWorker(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ulysses: worker: unknown command %q\n", args[0])
	return exitUsage
}
