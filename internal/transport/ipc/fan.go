package ipc

import (
	"slices"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// The copy-engine mode spreads an operation's copies over side streams so
// that several copy engines work at once: on one stream the copy into this
// rank's own buffer and the one to each peer run one after another
// (SendRecvHeads of 128 MiB took 335 us on one stream,
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
func (f *copyFan) releases(ctx *driver.Context) []device.Release {
	var rs []device.Release
	for _, s := range f.sides {
		rs = append(rs, device.Release{What: "destroying a copy stream", Do: func() error { return ctx.StreamDestroy(s) }})
	}
	for _, e := range slices.Concat(f.joins, []driver.Event{f.fork}) {
		if e != 0 {
			rs = append(rs, device.Release{What: "destroying a copy stream's event", Do: func() error { return ctx.EventDestroy(e) }})
		}
	}
	return rs
}

// planBytes is the bytes that the copies cs move.
func planBytes(cs []plan.Box) int64 {
	var n int64
	for _, c := range cs {
		n += c.Bytes()
	}
	return n
}
