package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// peerCopyBytes and peerCopyIters size the peer copy rate measurement.
const (
	peerCopyBytes = 256 << 20
	peerCopyIters = 20
)

// measurePeerCopy measures the one-way copy rate from GPU 0 to GPU 1 (or
// GPU 0 to itself on a one-GPU machine) with iters copies of n bytes. A
// failure is a note, not fatal.
func measurePeerCopy(n int64, iters int) (bw float64, pair, note string) {
	drv, err := driver.Load()
	src, dst := 0, 0
	if err == nil {
		if count, cerr := drv.DeviceCount(); cerr == nil && count >= 2 {
			dst = 1
		}
	}
	pair = fmt.Sprintf("GPU %d -> GPU %d", src, dst)
	if src == dst {
		pair += " (one GPU: a local copy)"
	}
	if err == nil {
		bw, err = peerCopyBandwidth(drv, src, dst, n, iters)
	}
	if err != nil {
		return 0, pair, fmt.Sprintf("peer copy rate unknown, no floor: %s", oneLine(err))
	}
	return bw, pair, ""
}

// peerCopyBandwidth measures the one-way copy rate from device src to
// device dst in bytes per second: iters copies of n bytes by the copy
// engines (cuMemcpyPeerAsync), timed with device events after two warm-up
// copies. Benchmarks divide NVLink bytes by it to get their floor. It
// allocates n bytes on each device for the duration of the call, and must
// run while the process has no Comm: freeing waits for the whole device.
func peerCopyBandwidth(drv *driver.Driver, src, dst int, n int64, iters int) (float64, error) {
	if n < 1 || iters < 1 {
		return 0, fmt.Errorf("peer copy rate of %d copies of %d bytes: nothing to time", iters, n)
	}
	var pc peerCopy
	defer pc.release()
	if err := pc.open(drv, src, dst, uint64(n)); err != nil {
		return 0, err
	}
	d, err := pc.time(iters)
	if err != nil {
		return 0, err
	}
	return float64(n) * float64(iters) / d.Seconds(), nil
}

// peerCopy is what the measurement holds: both devices' primary contexts,
// a buffer of n bytes on each, and a stream and two timing events on the
// source device.
type peerCopy struct {
	src, dst *driver.Context
	from, to driver.DevicePtr
	n        uint64
	timed    timedStream // on the source device
	undo     undoList    // what release runs
}

// open retains the contexts, enables peer access and allocates the
// buffers, then makes the stream and the events and fills the source.
func (pc *peerCopy) open(drv *driver.Driver, src, dst int, n uint64) error {
	var err error
	pc.n = n
	if pc.src, err = drv.RetainPrimaryContext(src); err != nil {
		return err
	}
	pc.undo.add(pc.src.Release)
	if pc.dst, err = drv.RetainPrimaryContext(dst); err != nil {
		return err
	}
	pc.undo.add(pc.dst.Release)
	if src != dst {
		if err := pc.src.EnablePeerAccess(pc.dst); err != nil {
			return fmt.Errorf("enabling peer access: %w", err)
		}
	}
	if pc.from, err = pc.src.MemAlloc(n); err != nil {
		return err
	}
	pc.undo.add(func() error { return pc.src.MemFree(pc.from) })
	if pc.to, err = pc.dst.MemAlloc(n); err != nil {
		return err
	}
	pc.undo.add(func() error { return pc.dst.MemFree(pc.to) })
	return pc.openStream()
}

// openStream makes the stream and the events on the source device and
// fills the source buffer on that stream, before the copies.
func (pc *peerCopy) openStream() error {
	if err := pc.timed.open(pc.src, &pc.undo); err != nil {
		return err
	}
	return pc.src.MemsetD8Async(pc.from, 0x3C, pc.n, pc.timed.stream)
}

// time makes two warm-up copies, then iters timed ones, and returns the
// device time of the timed ones.
func (pc *peerCopy) time(iters int) (time.Duration, error) {
	copyOnce := func() error {
		return pc.src.MemcpyPeerAsync(pc.to, pc.dst, pc.from, pc.src, pc.n, pc.timed.stream)
	}
	err := errors.Join(copyOnce(), copyOnce()) // warm-up
	if err == nil {
		err = pc.timed.enqueue(func() error {
			var errs []error
			for range iters {
				errs = append(errs, copyOnce())
			}
			return errors.Join(errs...)
		})
	}
	var d time.Duration
	if err == nil {
		d, err = pc.timed.elapsed()
	}
	if err != nil {
		return 0, fmt.Errorf("timing peer copies: %w", err)
	}
	return d, nil
}

// release undoes what open did, as far as it got. Errors are ignored: the
// measurement is over.
func (pc *peerCopy) release() {
	_ = pc.undo.run()
}
