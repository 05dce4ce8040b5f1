// Command group drives every GPU of the machine from one process, as a
// Go service with a goroutine per GPU would: a Group holds one Comm per
// device, each rank enqueues its operation before any rank waits, and
// Group.Sync waits for all. Each rank holds a different number of tokens.
//
//	go run ./examples/group            # every GPU
//	go run ./examples/group --ranks 2  # two ranks, on GPU 0 if there is only one
//
// Two ranks on one GPU need CUDA_DEVICE_MAX_CONNECTIONS=32 in the
// environment (docs/GUIDE.md, "Several ranks on one GPU").
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
)

func main() {
	ranks := flag.Int("ranks", 0, "ranks, spread over the GPUs (0: one per GPU)")
	flag.Parse()
	if err := run(*ranks); err != nil {
		fmt.Fprintln(os.Stderr, "group:", err)
		os.Exit(1)
	}
	fmt.Println("round trip: ok")
}

// run makes the group and runs GatherHeads(SendRecvHeads(x)) on every
// rank at once: B=1, 8 heads of 64, bf16, 48 + 16r tokens on rank r.
func run(ranks int) error {
	sys, err := a2a.System()
	if err != nil {
		return err
	}
	if ranks == 0 {
		ranks = len(sys.Devices)
	}
	devices := make([]int, ranks)
	tokens := make([]int, ranks)
	for r := range devices {
		devices[r], tokens[r] = r%len(sys.Devices), 48+16*r
	}
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: 4096, HiddenDim: 8 * 64, DType: a2a.BFloat16}, devices)
	if err != nil {
		return err
	}
	defer g.Close() // closes every rank at once
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Go(func() { errs[r] = rank(g.Comm(r), tokens) }) // one goroutine per rank
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rank is one rank's part: its input, the two operations, the check.
func rank(c *a2a.Comm, tokens []int) error {
	if err := c.SetRankTokens(tokens); err != nil {
		return err
	}
	dev := c.Device()
	x, err := dev.Alloc([4]int{1, tokens[c.Rank()], 8, 64}, a2a.BFloat16)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	in := make([]byte, x.Bytes())
	ref.FillRandom(in, 7, c.Rank())
	if err := dev.Upload(x, in); err != nil {
		return err
	}
	q, err := c.SendRecvHeads(x) // [1, T, 8/P, 64]
	if err != nil {
		return err
	}
	back, err := c.GatherHeads(q) // [1, T_r, 8, 64]
	if err != nil {
		return err
	}
	out, err := dev.Download(back) // waits for this rank's operations, which wait for the peers'
	if err != nil {
		return err
	}
	if !bytes.Equal(in, out) {
		return fmt.Errorf("rank %d: the round trip changed the data", c.Rank())
	}
	return nil
}
