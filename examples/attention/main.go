//go:build linux

// Command attention runs one sequence-parallel attention step the way a
// diffusion transformer does, and checks it: every rank of a group in one
// process holds q, k and v for its share of the tokens, exchanges them so
// that it holds all tokens of its share of the heads
// (SendRecvHeadsPacked), runs a local attention kernel of its own over the
// whole sequence, and gives the result back by token (GatherHeadsPacked).
// The output must equal, bit for bit, the same kernel run on one GPU over
// the whole sequence and every head; the program then prints the share of
// the step each rank spent in the exchange.
//
//	go run ./examples/attention                # one rank per GPU
//	go run ./examples/attention --ranks 4      # four ranks over the GPUs
//
// Several ranks on one GPU need CUDA_DEVICE_MAX_CONNECTIONS=32 in the
// environment (docs/GUIDE.md, "Several ranks on one GPU"). The kernel is
// attention.cu, shipped as PTX (go generate).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/ulysses-go/ulysses/a2a"
)

const headDim = 64 // the kernel's D

// shape is the step's size: every rank's token count, heads, batch.
type shape struct {
	tokens []int // per rank; T is their sum
	heads  int
	batch  int
	steps  int // timed steps after one warm-up

	// beforeRead, if set, runs before a rank reads a step's output (the
	// test waits a random few milliseconds there, as ranks of a service
	// are never in lockstep).
	beforeRead func()
}

func main() {
	ranks := flag.Int("ranks", 0, "ranks, spread over the GPUs (0: one per GPU)")
	tokens := flag.Int("tokens", 4096, "tokens of the whole sequence (uneven over the ranks)")
	heads := flag.Int("heads", 12, "attention heads of 64 (the ranks need not divide it)")
	steps := flag.Int("steps", 10, "timed steps")
	flag.Parse()
	shares, err := run(*ranks, *tokens, *heads, *steps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "attention:", err)
		os.Exit(1)
	}
	fmt.Println("output equals one GPU's, bit for bit")
	for r, s := range shares {
		fmt.Printf("rank %d: exchange %.3f ms of a %.3f ms step (%.1f%%)\n", r, s.exchange, s.step, 100*s.exchange/s.step)
	}
}

// split gives each of p ranks about total/p tokens, each rank a few more
// than the one before (total >= p: every rank gets at least one).
func split(total, p int) []int {
	base, skew := total/p, 0
	if p > 1 {
		skew = min(8, (base-1)/(p-1))
	}
	t := make([]int, p)
	for r := range t {
		t[r] = base + skew*(2*r-p+1)
	}
	t[p-1] += total - p*base
	return t
}

// run checks and times the step on a group of ranks.
func run(ranks, tokens, heads, steps int) ([]share, error) {
	return runShape(ranks, tokens, heads, steps, nil)
}

// runShape is run with a hook before every read of an output.
func runShape(ranks, tokens, heads, steps int, beforeRead func()) ([]share, error) {
	sys, err := a2a.System()
	if err != nil {
		return nil, err
	}
	if ranks == 0 {
		ranks = len(sys.Devices)
	}
	if tokens < ranks || heads < 1 || steps < 1 {
		return nil, fmt.Errorf("need tokens >= ranks (%d >= %d), heads >= 1, steps >= 1", tokens, ranks)
	}
	sh := shape{tokens: split(tokens, ranks), heads: heads, batch: 1, steps: steps, beforeRead: beforeRead}
	q, k, v := randomBF16(sh, 1), randomBF16(sh, 2), randomBF16(sh, 3)
	want, err := onOneGPU(sh, q, k, v)
	if err != nil {
		return nil, fmt.Errorf("one GPU: %w", err)
	}
	devices := make([]int, ranks)
	for r := range devices {
		devices[r] = r % len(sys.Devices)
	}
	cfg := a2a.Config{MaxTokens: sh.batch * tokens, HiddenDim: heads * headDim, DType: a2a.BFloat16, MaxTensors: 3}
	g, err := a2a.NewGroup(cfg, devices)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	shares := make([]share, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() { shares[r], errs[r] = rank(g.Comm(r), sh, [3][]byte{q, k, v}, want) })
	}
	wg.Wait()
	return shares, errors.Join(errs...)
}

// randomBF16 is a [B, T, H, 64] bf16 tensor of values in [-2, 2), the
// whole sequence, in token order (rank 0's tokens first).
func randomBF16(sh shape, seed uint64) []byte {
	n := sh.batch * sum(sh.tokens) * sh.heads * headDim
	rng := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, 2*n)
	for i := range n {
		bits := math.Float32bits(4*rng.Float32() - 2)
		b[2*i], b[2*i+1] = byte(bits>>16), byte(bits>>24)
	}
	return b
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// rows returns rank r's tokens of a [B, T, H, 64] tensor of the whole
// sequence, as a [B, T_r, H, 64] tensor.
func rows(whole []byte, sh shape, r int) []byte {
	row := sh.heads * headDim * 2
	t := sum(sh.tokens)
	first := sum(sh.tokens[:r])
	var out []byte
	for b := range sh.batch {
		start := (b*t + first) * row
		out = append(out, whole[start:start+sh.tokens[r]*row]...)
	}
	return out
}

// same reports whether got equals want and, if not, where they first differ.
func same(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	return fmt.Errorf("output differs from one GPU's at byte %d of %d (element %d)", i, len(want), i/2)
}
