//go:build linux

package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ulysses-go/ulysses/a2a"
)

// share is one rank's median step on the device, in milliseconds: the
// two exchanges together, and the whole step.
type share struct{ exchange, step float64 }

// onOneGPU runs the kernel over the whole sequence and every head on GPU
// 0 and returns its [B, T, H, 64] output.
func onOneGPU(sh shape, q, k, v []byte) (out []byte, err error) {
	dev, err := a2a.OpenDevice(0)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, dev.Close()) }()
	g, err := openGPU(0)
	if err != nil {
		return nil, err
	}
	defer g.close()
	shp := [4]int{sh.batch, sum(sh.tokens), sh.heads, headDim}
	var ts [4]a2a.Tensor
	for i := range ts {
		if ts[i], err = dev.Alloc(shp, a2a.BFloat16); err != nil {
			return nil, err
		}
		defer dev.Free(ts[i])
	}
	for i, b := range [][]byte{q, k, v} {
		if err := dev.Upload(ts[i], b); err != nil {
			return nil, err
		}
	}
	if err := dev.Fill(ts[3], 0xff); err != nil { // poison: a NaN in bf16
		return nil, err
	}
	s, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	defer dev.DestroyStream(s)
	if err := g.attention(s, ts[0], ts[1], ts[2], ts[3]); err != nil {
		return nil, err
	}
	if err := dev.SyncStream(s); err != nil {
		return nil, err
	}
	return dev.Download(ts[3])
}

// ranked is one rank's part of the step: its device, kernel, stream,
// inputs, attention output and events.
type ranked struct {
	c      *a2a.Comm
	g      *gpu
	s      a2a.Stream
	x      []a2a.Tensor // q, k, v: [B, T_r, H, 64]
	o      a2a.Tensor   // attention of this rank's heads: [B, T, H_r, 64]
	ev     events
	sh     shape
	ownOut []byte // the rank's rows of the one-GPU output
}

// rank checks and times the step on one rank: a warm-up and steps timed
// steps, every output compared with the one-GPU run's.
func rank(c *a2a.Comm, sh shape, in [3][]byte, want []byte) (share, error) {
	rk, err := newRanked(c, sh, in)
	if rk != nil {
		defer rk.close()
	}
	if err != nil {
		return share{}, err
	}
	rk.ownOut = rows(want, sh, c.Rank())
	var exch, step []float64
	for i := range sh.steps + 1 {
		ms, err := rk.step()
		if err != nil {
			return share{}, fmt.Errorf("rank %d, step %d: %w", c.Rank(), i, err)
		}
		if i > 0 {
			exch, step = append(exch, ms[0]+ms[2]), append(step, ms[0]+ms[1]+ms[2])
		}
	}
	return share{exchange: median(exch), step: median(step)}, nil
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// newRanked uploads the rank's inputs and makes its stream and events.
func newRanked(c *a2a.Comm, sh shape, in [3][]byte) (*ranked, error) {
	if err := c.SetRankTokens(sh.tokens); err != nil {
		return nil, err
	}
	dev := c.Device()
	g, err := openGPU(dev.Info().Ordinal)
	if err != nil {
		return nil, err
	}
	rk := &ranked{c: c, g: g, sh: sh}
	_, myHeads := a2a.HeadRange(sh.heads, c.WorldSize(), c.Rank())
	for i := range in {
		x, err := dev.Alloc([4]int{sh.batch, sh.tokens[c.Rank()], sh.heads, headDim}, a2a.BFloat16)
		if err != nil {
			return rk, err
		}
		rk.x = append(rk.x, x)
		if err := dev.Upload(x, rows(in[i], sh, c.Rank())); err != nil {
			return rk, err
		}
	}
	if rk.o, err = dev.Alloc([4]int{sh.batch, sum(sh.tokens), myHeads, headDim}, a2a.BFloat16); err != nil {
		return rk, err
	}
	if rk.s, err = dev.NewStream(); err != nil {
		return rk, err
	}
	rk.ev, err = g.newEvents(4)
	return rk, err
}

// step runs the exchange, the kernel and the exchange back on the rank's
// stream, checks the output and returns the three phases' device times.
func (rk *ranked) step() ([]float64, error) {
	dev, on := rk.c.Device(), rk.c.On(rk.s)
	if err := dev.Fill(rk.o, 0xff); err != nil { // poison last step's result
		return nil, err
	}
	qkv := make([]a2a.Tensor, 3) // [B, T, H_r, 64] views
	out := make([]a2a.Tensor, 1) // [B, T_r, H, 64] view
	for _, enqueue := range []func() error{
		func() error { return rk.g.record(rk.ev[0], rk.s) },
		func() error { return on.SendRecvHeadsPacked(qkv, rk.x) },
		func() error { return rk.g.record(rk.ev[1], rk.s) },
		func() error { return rk.g.attention(rk.s, qkv[0], qkv[1], qkv[2], rk.o) },
		func() error { return rk.g.record(rk.ev[2], rk.s) },
		func() error { return on.GatherHeadsPacked(rk.sh.heads, out, []a2a.Tensor{rk.o}) },
		func() error { return rk.g.record(rk.ev[3], rk.s) },
	} {
		if err := enqueue(); err != nil {
			return nil, err
		}
	}
	ms, err := rk.g.elapsed(rk.ev)
	if err != nil {
		return nil, err
	}
	if rk.sh.beforeRead != nil {
		rk.sh.beforeRead()
	}
	got, err := dev.Download(out[0])
	if err != nil {
		return nil, err
	}
	// Poison the region the view lay in (the caller's until the next
	// operation): a later step that wrote nothing there cannot pass on
	// this step's bytes.
	if err := dev.Fill(rk.c.Buffer(), 0xff); err != nil {
		return nil, err
	}
	return ms, same(got, rk.ownOut)
}

func (rk *ranked) close() {
	dev := rk.c.Device()
	if rk.ev != nil {
		rk.g.destroy(rk.ev)
	}
	if rk.s != 0 {
		_ = dev.DestroyStream(rk.s)
	}
	for _, t := range append(rk.x, rk.o) {
		if t.Ptr != 0 {
			_ = dev.Free(t)
		}
	}
	rk.g.close()
}
