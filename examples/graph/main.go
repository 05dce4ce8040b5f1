// Command graph captures a model step's exchanges into a CUDA graph once
// and replays it with new data, as a diffusion model's denoising loop
// would: each rank of a group in one process records
// GatherHeads(SendRecvHeads(x)) on a stream of its own, then replays it
// every step; the view the graph returns keeps its address at every
// replay, and holds the step's output until the next replay.
//
//	go run ./examples/graph --steps 20
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
)

func main() {
	steps := flag.Int("steps", 10, "replays, each with new data")
	flag.Parse()
	if err := run(*steps); err != nil {
		fmt.Fprintln(os.Stderr, "graph:", err)
		os.Exit(1)
	}
	fmt.Println("replays: ok")
}

// step is one rank's stream, input, output view and graph.
type step struct {
	comm  *a2a.Comm
	s     a2a.Stream
	x, o  a2a.Tensor
	graph *a2a.Graph
}

// run makes a group of two ranks (on two GPUs, or both on GPU 0, which
// needs CUDA_DEVICE_MAX_CONNECTIONS=32), captures each rank's step and
// replays the steps.
func run(steps int) error {
	sys, err := a2a.System()
	if err != nil {
		return err
	}
	devices := []int{0, min(1, len(sys.Devices)-1)}
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: 1024, HiddenDim: 8 * 64, DType: a2a.BFloat16}, devices)
	if err != nil {
		return err
	}
	defer g.Close()
	tokens := []int{40, 24}
	ranks := make([]*step, g.Size())
	for r := range ranks {
		st, err := capture(g.Comm(r), tokens)
		if st != nil {
			defer st.close()
		}
		if err != nil {
			return err
		}
		ranks[r] = st
	}
	for i := range steps {
		want := make([][]byte, len(ranks))
		for r, st := range ranks { // every rank's replay is enqueued before any is waited for
			want[r] = make([]byte, st.x.Bytes())
			ref.FillRandom(want[r], uint64(i), r)
			if err := st.comm.Device().Upload(st.x, want[r]); err != nil {
				return err
			}
			if err := st.graph.Launch(st.s); err != nil {
				return err
			}
		}
		for r, st := range ranks {
			if err := st.comm.Device().SyncStream(st.s); err != nil {
				return err
			}
			got, err := st.comm.Device().Download(st.o)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want[r]) {
				return fmt.Errorf("step %d, rank %d: the output differs from the input", i, r)
			}
		}
	}
	return nil
}

// capture records c's step on a stream of its own.
func capture(c *a2a.Comm, tokens []int) (*step, error) {
	st := &step{comm: c}
	dev := c.Device()
	if err := c.SetRankTokens(tokens); err != nil {
		return nil, err
	}
	var err error
	if st.s, err = dev.NewStream(); err != nil {
		return nil, err
	}
	if st.x, err = dev.Alloc([4]int{1, tokens[c.Rank()], 8, 64}, a2a.BFloat16); err != nil {
		return st, err
	}
	on := c.On(st.s)
	st.graph, err = a2a.CaptureGraph(st.s, func() error {
		q, err := on.SendRecvHeads(st.x) // captured, not run
		if err == nil {
			st.o, err = on.GatherHeads(q) // the step's output: its address holds at every replay
		}
		return err
	}, c)
	return st, err
}

// close releases what capture made.
func (st *step) close() {
	if st.graph != nil {
		st.graph.Close()
	}
	dev := st.comm.Device()
	if st.x.Ptr != 0 {
		dev.Free(st.x)
	}
	dev.DestroyStream(st.s)
}
