// Command join is the quick start: one process per GPU, the ranks meeting
// at rank 0's address. Each rank sends every other rank the heads it owns
// of its own tokens (SendRecvHeads), sends them back (GatherHeads) and
// checks that it got its input back, byte for byte.
//
//	export ULYSSES_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
//	go run ./examples/join --rank 1 --world 2 &
//	go run ./examples/join --rank 0 --world 2
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/a2a/ref"
)

func main() {
	rank := flag.Int("rank", 0, "this process's rank")
	world := flag.Int("world", 2, "number of ranks, one process (and GPU) each")
	addr := flag.String("addr", "127.0.0.1:29600", "rank 0's address, where the ranks meet")
	flag.Parse()
	secret := []byte(os.Getenv("ULYSSES_SECRET")) // the same on every rank, at least 16 bytes
	if err := run(*rank, *world, *addr, secret); err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		os.Exit(1)
	}
	fmt.Printf("rank %d: round trip: ok\n", *rank)
}

// run is one rank: B=1, 1024 tokens per rank, 32 heads of 128, bf16. It
// returns the first error, joined with what the deferred Close and Free
// calls return.
func run(rank, world int, addr string, secret []byte) (err error) {
	const batch, tokens, heads, headDim = 1, 1024, 32, 128
	ex, err := exchange.NewTCP(exchange.TCPConfig{Addr: addr, Rank: rank, WorldSize: world, Secret: secret})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ex.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // rank 0 waits this long
	defer cancel()
	cfg := a2a.Config{Rank: rank, WorldSize: world, MaxTokens: tokens * world, HiddenDim: heads * headDim,
		DType: a2a.BFloat16} // rank r on GPU r modulo the GPUs (Config.Device to choose)
	comm, err := a2a.Join(ctx, cfg, ex)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, comm.Close()) }() // Close waits for the peers' goodbyes

	counts := make([]int, world) // tokens of every rank; uneven counts are fine
	for r := range counts {
		counts[r] = tokens
	}
	if err := comm.SetRankTokens(counts); err != nil {
		return err
	}
	dev := comm.Device() // memory helpers, for a program with no other CUDA binding
	x, err := dev.Alloc([4]int{batch, tokens, heads, headDim}, a2a.BFloat16)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dev.Free(x)) }()
	in := make([]byte, x.Bytes())
	ref.FillRandom(in, 1, rank)
	if err := dev.Upload(x, in); err != nil {
		return err
	}
	q, err := comm.SendRecvHeads(x) // [B, T, H/P, D]: this rank's heads of every token, a view
	if err != nil {
		return err
	}
	back, err := comm.GatherHeads(q) // [B, T_r, H, D] again; takes the view as it is
	if err != nil {
		return err
	}
	out, err := dev.Download(back) // waits for both operations
	if err != nil {
		return err
	}
	if !bytes.Equal(in, out) {
		return errors.New("the round trip changed the data")
	}
	return comm.Sync() // operations return at once; Sync waits for them, never forever
}
