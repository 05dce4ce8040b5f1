package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/internal/launch"
)

// roundTimeout bounds one exchanger round (a Join or a status round): the
// slowest rank may be finishing a case or a size meanwhile.
const roundTimeout = 5 * time.Minute

// newFlagSet makes a subcommand's flag set, whose usage shows synopsis and
// about before the flags.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// usageOf prints fs's usage to w.
func usageOf(fs *flag.FlagSet, w io.Writer) {
	fs.SetOutput(w)
	fs.Usage()
}

// parseFlags parses args into fs, reporting errors on stderr. ok is false
// when the caller should return code (0 after -h, 2 on bad usage).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	return parseFlagsArgs(fs, args, stderr, 0)
}

// parseFlagsArgs is parseFlags for a command that takes nargs arguments
// (fs.Args() after it), before, between or after its flags.
func parseFlagsArgs(fs *flag.FlagSet, args []string, stderr io.Writer, nargs int) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	err := parseInterspersed(fs, args)
	fs.SetOutput(stderr)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		fs.Usage()
		return exitUsage, false
	}
	if fs.NArg() > nargs {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(nargs))
		return exitUsage, false
	}
	return 0, true
}

// parseInterspersed parses the flags in args into fs wherever they stand
// among the positional arguments, which fs.Args() then returns in their
// order: package flag stops at the first argument that is not a flag, so
// that `plot FILE -o x.svg` and `plot --dtype bf16 FILE -o x.svg` would
// refuse -o. A flag's value is the argument after it unless the flag is
// boolean or written -name=value; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue // Parse reports it (or -h, -help)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := fs.Parse(flags); err != nil {
		return err
	}
	// Every flag is set; this leaves the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, positional...))
}

// groupFlags lay out the ranks of check and bench: every rank on this
// host, a process each, or (with --addr) one rank of a group across hosts.
type groupFlags struct {
	world       int
	ranksPerGPU int
	transport   string
	sharing     string
	addr        string // rank 0's exchange, for one rank of a group across hosts
	rank        int    // with addr
	device      int    // with addr; -1: rank modulo the GPUs here
}

func (g *groupFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&g.world, "world", 0, "number of ranks, rank r on GPU r modulo the GPU count (default: GPUs * ranks-per-gpu)")
	fs.IntVar(&g.ranksPerGPU, "ranks-per-gpu", 1, "ranks per GPU when --world is not given")
	fs.StringVar(&g.transport, "transport", "auto", "how the ranks exchange (a2a.Config.Transport): ipc (CUDA IPC: one host, peer access between every pair of GPUs), nccl, or auto (ipc where it works, nccl otherwise)")
	fs.StringVar(&g.sharing, "sharing", "default", "how each rank's buffer is shared with the other processes (a2a.Config.Sharing): legacy-ipc (cuIpcGetMemHandle), fd (cuMemCreate, a POSIX file descriptor over a Unix socket), auto (fd where the GPU supports it), or default (auto)")
	fs.StringVar(&g.addr, "addr", "", "host:port of rank 0's exchange, for a group across hosts: run the command once per rank, each with --world and --rank (rank 0 listens there), with the same secret in "+launch.EnvSecret+" on every host")
	fs.IntVar(&g.rank, "rank", -1, "with --addr: the rank this process runs")
	fs.IntVar(&g.device, "device", -1, "with --addr: this rank's GPU on this host (default: the rank modulo this host's GPUs)")
}

// validate checks what can be checked without the GPUs: a bad flag is a
// usage error before the driver is loaded.
func (g groupFlags) validate() error {
	if err := g.validateSize(); err != nil {
		return err
	}
	if _, err := parseTransport(g.transport); err != nil {
		return err
	}
	if _, err := parseSharing(g.sharing); err != nil {
		return err
	}
	if g.addr == "" {
		if g.rank != -1 || g.device != -1 {
			return fmt.Errorf("--rank and --device go with --addr (one rank of a group across hosts)")
		}
		return nil
	}
	switch {
	case g.world < 1:
		return fmt.Errorf("--addr needs --world: the group's size")
	case g.rank < 0 || g.rank >= g.world:
		return fmt.Errorf("--addr needs --rank in 0..%d", g.world-1)
	case g.device < -1:
		return fmt.Errorf("--device %d is negative", g.device)
	}
	cfg := g.tcpConfig()
	_, err := exchange.NewTCP(cfg) // checks without any I/O, as remoteMember will
	if errors.Is(err, exchange.ErrNoSecret) {
		return fmt.Errorf("--addr needs the group's secret in %s (the same on every host, at least %d bytes; it has %d): anyone who reaches the address could join the group otherwise",
			launch.EnvSecret, exchange.MinSecretSize, len(cfg.Secret))
	}
	if err != nil {
		return fmt.Errorf("--addr %q: %w", g.addr, err)
	}
	return nil
}

// tcpConfig is the exchanger of one rank of a group across hosts: rank
// 0's address, this rank, the world size and the secret of ULYSSES_SECRET.
func (g groupFlags) tcpConfig() exchange.TCPConfig {
	return exchange.TCPConfig{Addr: g.addr, Rank: g.rank, WorldSize: g.world, Secret: []byte(os.Getenv(launch.EnvSecret))}
}

// validateSize checks --world and --ranks-per-gpu.
func (g groupFlags) validateSize() error {
	if g.ranksPerGPU < 1 {
		return fmt.Errorf("--ranks-per-gpu %d must be at least 1", g.ranksPerGPU)
	}
	if g.world < 0 || g.world > a2a.MaxWorldSize {
		return fmt.Errorf("--world %d not in 1..%d (0: one rank per GPU times --ranks-per-gpu)", g.world, a2a.MaxWorldSize)
	}
	return nil
}

// parseTransport reads --transport ("" is its default, auto).
func parseTransport(s string) (a2a.Transport, error) {
	if s == "" {
		return a2a.TransportAuto, nil
	}
	for _, t := range []a2a.Transport{a2a.TransportIPC, a2a.TransportNCCL, a2a.TransportAuto} {
		if s == t.String() {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown --transport %q (want ipc, nccl or auto)", s)
}

// parseSharing reads --sharing.
func parseSharing(s string) (a2a.Sharing, error) {
	k, err := a2a.ParseSharing(s)
	if err != nil {
		return 0, fmt.Errorf("unknown --sharing %q (want default, legacy-ipc, fd or auto)", s)
	}
	return k, nil
}

// remoteMember is the one rank of a group across hosts that --addr,
// --rank and --device name, on a host with gpus GPUs: its exchanger dials
// rank 0 (or, on rank 0, listens) at --addr with the secret of
// ULYSSES_SECRET.
func (g groupFlags) remoteMember(gpus int) (*member, error) {
	if gpus < 1 {
		return nil, fmt.Errorf("no GPUs: %w", a2a.ErrNoDevice)
	}
	device := g.device
	if device < 0 {
		device = g.rank % gpus
	}
	if device >= gpus {
		return nil, fmt.Errorf("--device %d: this host has %d GPUs", device, gpus)
	}
	ex, err := exchange.NewTCP(g.tcpConfig())
	if err != nil {
		return nil, err
	}
	return &member{rank: g.rank, world: g.world, device: &device, ex: ex}, nil
}

// layout returns the world size and each rank's device for a machine with
// gpus GPUs.
func (g groupFlags) layout(gpus int) (int, []int, error) {
	if gpus < 1 {
		return 0, nil, fmt.Errorf("no GPUs: %w", a2a.ErrNoDevice)
	}
	if err := g.validateSize(); err != nil {
		return 0, nil, err
	}
	world := g.world
	if world == 0 {
		world = gpus * g.ranksPerGPU
	}
	if world > a2a.MaxWorldSize {
		return 0, nil, fmt.Errorf("%d GPUs x %d ranks per GPU is over %d ranks: set --world", gpus, g.ranksPerGPU, a2a.MaxWorldSize)
	}
	devices := make([]int, world)
	for r := range devices {
		devices[r] = r % gpus
	}
	return world, devices, nil
}

// parseMover reads --mover.
func parseMover(s string) (a2a.Mover, error) {
	for _, m := range []a2a.Mover{a2a.MoverKernels, a2a.MoverCopyEngines, a2a.MoverAuto} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown --mover %q (want kernels, copy-engines or auto)", s)
}

// parseDTypes reads a comma-separated list of dtype names, without repeats.
func parseDTypes(s string) ([]a2a.DType, error) {
	var out []a2a.DType
	seen := map[a2a.DType]bool{}
	for _, f := range splitList(s) {
		d, err := a2a.ParseDType(f)
		if err != nil {
			return nil, err
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no dtypes in %q", s)
	}
	return out, nil
}

// signalContext is cancelled by an interrupt or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// startRanks runs `ulysses worker <sub> args...` once per rank, each rank's
// lines going to output (prefixed "[rank N] ").
func startRanks(ctx context.Context, sub string, args []string, devices []int, output io.Writer) ([]launch.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable: %w", err)
	}
	return launch.Run(ctx, launch.Spec{
		Exe:     exe,
		Args:    append([]string{"worker", sub}, args...),
		World:   len(devices),
		Devices: devices,
		Output:  output,
	})
}

// member is one rank of a running group: who it is, its device and its
// exchanger (TCP between processes, or exchange.Local between goroutines).
type member struct {
	rank, world int
	device      *int // nil: the rank's default
	ex          memberExchanger
	burn        *burner // bench --overlap's burn kernel; nil otherwise
}

// memberExchanger is what a member exchanges through.
type memberExchanger interface {
	a2a.Exchanger
	Close() error
}

// joinGroup reads the rank's environment and makes its exchanger, keyed
// with the group's secret that the parent passed (launch.EnvSecret).
func joinGroup() (*member, error) {
	r, ok, err := launch.FromEnv()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("not started by ulysses check or bench (no %s in the environment)", launch.EnvRank)
	}
	ex, err := exchange.NewTCP(exchange.TCPConfig{Addr: r.Addr, Rank: r.Rank, WorldSize: r.World, Secret: r.Secret})
	if err != nil {
		return nil, err
	}
	return &member{rank: r.Rank, world: r.World, device: r.Device, ex: ex}, nil
}

// gather is one exchanger round: every rank's local bytes, by rank.
func (m *member) gather(local []byte) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	return m.ex.AllGather(ctx, local)
}

// join makes a connected Comm for cfg (rank, world and device filled in).
func (m *member) join(cfg a2a.Config) (*a2a.Comm, error) {
	cfg.Rank, cfg.WorldSize, cfg.Device = m.rank, m.world, m.device
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	return a2a.Join(ctx, cfg, m.ex)
}

// allOK is a status round: it reports whether every rank passed ok.
func (m *member) allOK(ok bool) (bool, error) {
	b := []byte{0}
	if ok {
		b[0] = 1
	}
	all, err := m.gather(b)
	if err != nil {
		return false, err
	}
	for _, s := range all {
		if len(s) != 1 || s[0] != 1 {
			return false, nil
		}
	}
	return true, nil
}
