package main

import (
	"errors"
	"slices"
	"time"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/nccl"
)

// ncclReference is NCCL's own time, through the library's binding, for
// one rank's bytes at world one: a grouped send to itself and receive
// from itself, and ncclAlltoAll where the loaded NCCL has it (0 where
// not), each the median of iters operations timed with events, on a
// blocking communicator (NCCL's launch on the calling thread, as
// PyTorch's).
type ncclReference struct {
	SendSelfUS float64 `json:"nccl_send_self_us"`
	AlltoAllUS float64 `json:"nccl_alltoall_us,omitempty"`
}

// timeNCCLReference times ncclReference for n bytes on ctx's device.
func timeNCCLReference(ctx *driver.Context, n int64, warmup, iters int) (ncclReference, error) {
	var ref ncclReference
	lib, err := nccl.Load()
	if err != nil {
		return ref, err
	}
	err = ctx.Do(func() error {
		id, err := lib.UniqueID()
		if err != nil {
			return err
		}
		comm, err := lib.InitRankOptions(1, 0, id, nccl.CommOptions{Blocking: true})
		if err != nil {
			return err
		}
		defer comm.Destroy()
		bufs, err := ctx.MemAlloc(uint64(2 * n))
		if err != nil {
			return err
		}
		defer ctx.MemFree(bufs)
		src, dst := uintptr(bufs), uintptr(bufs)+uintptr(n)
		sendSelf := func(s driver.Stream) error {
			return errors.Join(lib.GroupStart(), comm.Send(src, uint64(n), nccl.Uint8, 0, uintptr(s)),
				comm.Recv(dst, uint64(n), nccl.Uint8, 0, uintptr(s)), lib.GroupEnd())
		}
		if ref.SendSelfUS, err = eventMedian(ctx, warmup, iters, sendSelf); err != nil || !lib.Has(nccl.FeatureAlltoAll) {
			return err
		}
		ref.AlltoAllUS, err = eventMedian(ctx, warmup, iters, func(s driver.Stream) error {
			return comm.AlltoAll(src, dst, uint64(n), nccl.Uint8, uintptr(s))
		})
		return err
	})
	return ref, err
}

// eventMedian runs warmup calls of op on a new stream, then times iters
// more one at a time with events, and returns the median in
// microseconds. The context must be current.
func eventMedian(ctx *driver.Context, warmup, iters int, op func(driver.Stream) error) (float64, error) {
	s, err := ctx.StreamCreate(true)
	if err != nil {
		return 0, err
	}
	defer ctx.StreamDestroy(s)
	var ev [2]driver.Event
	for i := range ev {
		if ev[i], err = ctx.EventCreate(true); err != nil {
			return 0, err
		}
		defer ctx.EventDestroy(ev[i])
	}
	for range warmup {
		if err := op(s); err != nil {
			return 0, err
		}
	}
	us := make([]float64, 0, iters)
	for range iters {
		err := errors.Join(ctx.EventRecord(ev[0], s), op(s), ctx.EventRecord(ev[1], s), ctx.EventSynchronize(ev[1]))
		if err != nil {
			return 0, err
		}
		d, err := ctx.EventElapsed(ev[0], ev[1])
		if err != nil {
			return 0, err
		}
		us = append(us, float64(d)/float64(time.Microsecond))
	}
	slices.Sort(us)
	return median(us), nil
}
