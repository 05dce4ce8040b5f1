package main

import (
	"errors"
	"fmt"
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
// PyTorch's). Where NCCL has them (2.27-2.28), the same send from and
// into ncclMemAlloc memory registered as a window, and ncclAlltoAll on a
// communicator of the zero-CTA policy (the copy engines where NCCL can)
// over such memory: whether those help, for the transport to take them.
// A failure of those two is noted, not fatal: they are references.
type ncclReference struct {
	SendSelfUS        float64 `json:"nccl_send_self_us"`
	AlltoAllUS        float64 `json:"nccl_alltoall_us,omitempty"`
	WindowSendSelfUS  float64 `json:"nccl_window_send_self_us,omitempty"`
	ZeroCTAAlltoAllUS float64 `json:"nccl_zero_cta_alltoall_us,omitempty"`
	Note              string  `json:"nccl_reference_note,omitempty"`
}

// timeNCCLReference times ncclReference for n bytes on ctx's device.
func timeNCCLReference(ctx *driver.Context, n int64, warmup, iters int) (ncclReference, error) {
	var ref ncclReference
	lib, err := nccl.Load()
	if err != nil {
		return ref, err
	}
	err = ctx.Do(func() error {
		comm, err := selfComm(lib, nccl.CommOptions{Blocking: true})
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
		if ref.SendSelfUS, err = eventMedian(ctx, warmup, iters, sendSelf(lib, comm, src, dst, n)); err != nil {
			return err
		}
		if lib.Has(nccl.FeatureAlltoAll) {
			if ref.AlltoAllUS, err = eventMedian(ctx, warmup, iters, alltoAll(comm, src, dst, n)); err != nil {
				return err
			}
		}
		var notes []error
		if lib.Has(nccl.FeatureMemAlloc) && lib.Has(nccl.FeatureWindows) {
			ref.WindowSendSelfUS, err = onWindow(lib, comm, n, func(src, dst uintptr) (float64, error) {
				return eventMedian(ctx, warmup, iters, sendSelf(lib, comm, src, dst, n))
			})
			notes = append(notes, noted("the send to itself on a window", err))
		}
		if lib.Has(nccl.FeatureMemAlloc) && lib.Has(nccl.FeatureWindows) && lib.Has(nccl.FeatureCTAPolicy) && lib.Has(nccl.FeatureAlltoAll) {
			ref.ZeroCTAAlltoAllUS, err = zeroCTAAlltoAll(ctx, lib, n, warmup, iters)
			notes = append(notes, noted("ncclAlltoAll of the zero-CTA policy", err))
		}
		if err := errors.Join(notes...); err != nil {
			ref.Note = err.Error()
		}
		return nil
	})
	return ref, err
}

// selfComm makes a communicator of one rank with opt.
func selfComm(lib *nccl.Library, opt nccl.CommOptions) (*nccl.Comm, error) {
	id, err := lib.UniqueID()
	if err != nil {
		return nil, err
	}
	return lib.InitRankOptions(1, 0, id, opt)
}

// sendSelf is a grouped send of n bytes at src to itself and their
// receive into dst.
func sendSelf(lib *nccl.Library, comm *nccl.Comm, src, dst uintptr, n int64) func(driver.Stream) error {
	return func(s driver.Stream) error {
		return errors.Join(lib.GroupStart(), comm.Send(src, uint64(n), nccl.Uint8, 0, uintptr(s)),
			comm.Recv(dst, uint64(n), nccl.Uint8, 0, uintptr(s)), lib.GroupEnd())
	}
}

// alltoAll is ncclAlltoAll of n bytes from src into dst (one rank).
func alltoAll(comm *nccl.Comm, src, dst uintptr, n int64) func(driver.Stream) error {
	return func(s driver.Stream) error { return comm.AlltoAll(src, dst, uint64(n), nccl.Uint8, uintptr(s)) }
}

// onWindow runs run with a source and a destination of n bytes each in
// ncclMemAlloc memory registered with comm as one window, then releases
// them.
func onWindow(lib *nccl.Library, comm *nccl.Comm, n int64, run func(src, dst uintptr) (float64, error)) (us float64, err error) {
	p, err := lib.MemAlloc(uint64(2 * n))
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, lib.MemFree(p)) }()
	w, err := comm.WindowRegister(p, uint64(2*n), 0)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, comm.WindowDeregister(w)) }()
	return run(p, p+uintptr(n))
}

// zeroCTAAlltoAll times ncclAlltoAll of n bytes on a blocking
// communicator of the zero-CTA policy, over a window.
func zeroCTAAlltoAll(ctx *driver.Context, lib *nccl.Library, n int64, warmup, iters int) (float64, error) {
	comm, err := selfComm(lib, nccl.CommOptions{Blocking: true, CTAPolicy: nccl.CTAPolicyZero})
	if err != nil {
		return 0, err
	}
	defer comm.Destroy()
	return onWindow(lib, comm, n, func(src, dst uintptr) (float64, error) {
		return eventMedian(ctx, warmup, iters, alltoAll(comm, src, dst, n))
	})
}

// noted is err with what failed, or nil.
func noted(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
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
