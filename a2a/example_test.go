package a2a_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
)

// One process per GPU: every rank runs this with its own rank (here a
// group of one, so that it runs on its own), and the ranks find each other
// through rank 0's address. They prove to each other that they hold the
// group's secret, the same on every rank (at least 16 bytes; the ulysses
// command makes a random one per group and passes it to every rank in
// ULYSSES_SECRET). This group of one makes its own.
func ExampleJoin() {
	const rank, world = 0, 1
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		fmt.Println(err)
		return
	}
	ex, err := exchange.NewTCP(exchange.TCPConfig{Addr: "127.0.0.1:0", Rank: rank, WorldSize: world, Secret: secret})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := a2a.Config{Rank: rank, WorldSize: world, MaxTokens: 1024, HiddenDim: 8 * 64, DType: a2a.BFloat16}
	comm, err := a2a.Join(ctx, cfg, ex)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer comm.Close()
	fmt.Println(roundTrip([]*a2a.Comm{comm}, []int{64}))
}

// One process for all GPUs: a Group holds one Comm per device (here every
// GPU, at most 2), and each operation is enqueued on every rank before any
// is waited for.
func ExampleNewGroup() {
	info, err := a2a.System()
	if err != nil {
		fmt.Println(err)
		return
	}
	devices := []int{0}
	if len(info.Devices) > 1 {
		devices = []int{0, 1}
	}
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: 1024, HiddenDim: 8 * 64, DType: a2a.BFloat16}, devices)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	comms := make([]*a2a.Comm, g.Size())
	tokens := make([]int, g.Size())
	for r := range comms {
		comms[r], tokens[r] = g.Comm(r), 48+16*r
	}
	fmt.Println(roundTrip(comms, tokens))
}

// Capture and replay: each rank captures its operations once into a CUDA
// graph on a stream of its own, then replays the graph as often as it
// likes; here a group in one process, each rank replaying
// GatherHeads(SendRecvHeads(x)) with new data in x each time.
func ExampleCaptureGraph() {
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: 1024, HiddenDim: 8 * 64, DType: a2a.BFloat16}, []int{0, 0})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	tokens := []int{40, 24}
	type rank struct {
		s     a2a.Stream
		x, o  a2a.Tensor
		graph *a2a.Graph
	}
	ranks := make([]rank, g.Size())
	for r := range ranks {
		c, rk := g.Comm(r), &ranks[r]
		dev := c.Device()
		if err := c.SetRankTokens(tokens); err != nil {
			fmt.Println(err)
			return
		}
		if rk.s, err = dev.NewStream(); err != nil {
			fmt.Println(err)
			return
		}
		defer dev.DestroyStream(rk.s)
		if rk.x, err = dev.Alloc([4]int{1, tokens[r], 8, 64}, a2a.BFloat16); err != nil {
			fmt.Println(err)
			return
		}
		defer dev.Free(rk.x)
		on := c.On(rk.s)
		rk.graph, err = a2a.CaptureGraph(rk.s, func() error {
			q, err := on.SendRecvHeads(rk.x) // captured, not run: the view's address holds at every replay
			if err == nil {
				rk.o, err = on.GatherHeads(q)
			}
			return err
		}, c)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer rk.graph.Close()
	}
	for replay := range 3 {
		want := make([][]byte, len(ranks))
		for r := range ranks {
			dev := g.Comm(r).Device()
			want[r] = make([]byte, ranks[r].x.Bytes())
			for i := range want[r] {
				want[r][i] = byte(i*131 + r*17 + replay)
			}
			if err := dev.Upload(ranks[r].x, want[r]); err != nil {
				fmt.Println(err)
				return
			}
			if err := ranks[r].graph.Launch(ranks[r].s); err != nil {
				fmt.Println(err)
				return
			}
		}
		for r := range ranks {
			dev := g.Comm(r).Device()
			if err := dev.SyncStream(ranks[r].s); err != nil {
				fmt.Println(err)
				return
			}
			got, err := dev.Download(ranks[r].o)
			if err != nil || !bytes.Equal(got, want[r]) {
				fmt.Println("replay", replay, "rank", r, "differs", err)
				return
			}
		}
	}
	fmt.Println("round trip: ok")
}

// roundTrip checks that GatherHeads(SendRecvHeads(x)) gives back every
// rank's x, enqueueing each operation on every rank in turn.
func roundTrip(comms []*a2a.Comm, tokens []int) string {
	xs := make([]a2a.Tensor, len(comms))
	want := make([][]byte, len(comms))
	for r, c := range comms {
		if err := c.SetRankTokens(tokens); err != nil {
			return err.Error()
		}
		dev := c.Device()
		x, err := dev.Alloc([4]int{1, tokens[r], 8, 64}, a2a.BFloat16)
		if err != nil {
			return err.Error()
		}
		defer dev.Free(x)
		want[r] = make([]byte, x.Bytes())
		for i := range want[r] {
			want[r][i] = byte(i*131 + r*17) // every head and token differs
		}
		if err := dev.Upload(x, want[r]); err != nil {
			return err.Error()
		}
		xs[r] = x
	}
	views := make([]a2a.Tensor, len(comms))
	for r, c := range comms {
		q, err := c.SendRecvHeads(xs[r]) // [1, T, 8/P, 64]: this rank's heads of every token
		if err != nil {
			return err.Error()
		}
		views[r] = q
	}
	for r, c := range comms {
		o, err := c.GatherHeads(views[r]) // back to [1, T_r, 8, 64]
		if err != nil {
			return err.Error()
		}
		views[r] = o
	}
	for r, c := range comms {
		got, err := c.Device().Download(views[r]) // waits for the operation
		if err != nil {
			return err.Error()
		}
		if !bytes.Equal(got, want[r]) {
			return fmt.Sprintf("rank %d: round trip differs", r)
		}
	}
	return "round trip: ok"
}
