package a2a

import (
	"slices"
	"strconv"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// The copy-engine mode spreads an operation's copies over side streams so
// that several copy engines work at once: on one stream the copy into this
// rank's own buffer and the one to each peer run one after another
// (GPU-RUNS.md run 34: SendRecvHeads of 128 MiB took 335 us on one stream,
// 249 us with a stream per copy, and 268-280 us with copies cut in 2 or 4
// pieces on streams of their own).
const (
	maxCopyStreams = 8         // side streams of a Comm in the copy-engine mode
	fanMinBytes    = 512 << 10 // an operation's bytes below which it stays on one stream
)

// copyFan is the copy-engine mode's streams: side streams that the
// operation's stream forks into (an event recorded on it, waited on by
// each) and joins back from (an event per side stream, waited on by it).
type copyFan struct {
	sides []driver.Stream
	fork  driver.Event
	joins []driver.Event
}

// newCopyFan creates a side stream per rank (at most maxCopyStreams) and
// their events in ctx.
func newCopyFan(ctx *driver.Context, world int) (*copyFan, error) {
	n := min(maxCopyStreams, world)
	f := &copyFan{}
	var err error
	if f.fork, err = ctx.EventCreate(false); err != nil {
		return f, api.WrapDriver("creating the copy streams' event", err)
	}
	for range n {
		s, err := ctx.StreamCreate(true)
		if err != nil {
			return f, api.WrapDriver("creating a copy stream", err)
		}
		f.sides = append(f.sides, s)
		e, err := ctx.EventCreate(false)
		if err != nil {
			return f, api.WrapDriver("creating a copy stream's event", err)
		}
		f.joins = append(f.joins, e)
	}
	return f, nil
}

// releases is what destroying f takes, for the share's graveyard.
func (f *copyFan) releases(ctx *driver.Context) []release {
	var rs []release
	for _, s := range f.sides {
		rs = append(rs, release{"destroying a copy stream", func() error { return ctx.StreamDestroy(s) }})
	}
	for _, e := range slices.Concat(f.joins, []driver.Event{f.fork}) {
		if e != 0 {
			rs = append(rs, release{"destroying a copy stream's event", func() error { return ctx.EventDestroy(e) }})
		}
	}
	return rs
}

// planBytes is the bytes that the copies cs move.
func planBytes(cs []boxCopy) int64 {
	var n int64
	for _, c := range cs {
		n += c.bytes()
	}
	return n
}

// enqueueCopies is the copy-engine mode's operation: the start barrier
// with a single buffer, every copy of p into the peers' data half
// ls.half (spread over the side streams, see copyFan), then ulysses_sync
// (one block: signal, wait, advance the epoch). Allocation-free.
func (t *smTransport) enqueueCopies(p opPlan, ls launchSpec) error {
	t.args.Active, t.args.Sig = 1, p.sig
	if t.args.HalfBytes == 0 {
		if err := t.launch(t.k.start, 1, farewellThreads, ls.stream); err != nil {
			return err
		}
	}
	ctx := t.dev.ctx
	fan := t.fan != nil && len(p.copies) > 1 && planBytes(p.copies) >= fanMinBytes
	if fan {
		if err := ctx.EventRecord(t.fan.fork, ls.stream); err != nil {
			return api.WrapDriver("forking the copy streams", err)
		}
	}
	used := 0 // side streams that waited on the fork
	t.share.gate.RLock()
	for _, c := range p.copies {
		s := ls.stream
		if fan {
			k := c.peer % len(t.fan.sides)
			for ; used <= k; used++ {
				if err := ctx.StreamWaitEvent(t.fan.sides[used], t.fan.fork); err != nil {
					t.share.gate.RUnlock()
					return api.WrapDriver("forking the copy streams", err)
				}
			}
			s = t.fan.sides[k]
		}
		if err := t.copyBox(p.inputs[c.tensor], c, ls.half, s); err != nil {
			t.share.gate.RUnlock()
			return err
		}
	}
	t.share.gate.RUnlock()
	for k := range used {
		if err := ctx.EventRecord(t.fan.joins[k], t.fan.sides[k]); err != nil {
			return api.WrapDriver("joining the copy streams", err)
		}
		if err := ctx.StreamWaitEvent(ls.stream, t.fan.joins[k]); err != nil {
			return api.WrapDriver("joining the copy streams", err)
		}
	}
	return t.launch(t.k.sync, 1, farewellThreads, ls.stream)
}

// copyBox enqueues c, from input on s into data half half of its peer.
func (t *smTransport) copyBox(input uint64, c boxCopy, half uint32, s driver.Stream) error {
	at := uint64(half) * t.args.HalfBytes
	from := driver.DevicePtr(input + uint64(c.src.off))
	to := driver.DevicePtr(t.args.Data[c.peer] + at + uint64(c.dst.off))
	if err := copyBoxAsync(t.dev.ctx, to, c.dst, from, c.src, c, s); err != nil {
		return api.WrapDriver("copying to rank "+strconv.Itoa(c.peer), err)
	}
	return nil
}
