package main

import (
	_ "embed"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/timing"
)

// burnPTX is the compute-bound kernel of bench --overlap (see burn.ptx).
//
//go:embed burn.ptx
var burnPTX string

// burnThreads is the burn kernel's block: one block per SM of 128 threads
// (a warp per scheduler, each with 8 independent FMA chains) leaves each
// SM room and issue slots for an exchange kernel's block beside it, as an
// attention kernel that overlaps with communication must. With 512
// threads nothing else made progress on the SMs while it ran, not even
// the copy-engine mode's one-block sync: every exchange took 65-100%
// longer beside it, against 1-6% with 128 (2 x H200).
const burnThreads = 128

// burnCalibration is the burn kernel's iteration count of its first
// timing, from which the count that lasts as long as the exchange is
// scaled.
const burnCalibration = 1 << 16

// burner runs the burn kernel on a stream of its own in the primary
// context of the Comm's device, timed with its own events.
type burner struct {
	ctx    *driver.Context
	module driver.Module
	fn     driver.Function
	timed  timedStream
	out    driver.DevicePtr
	blocks int
	args   struct {
		out   uint64
		iters uint32
	}
	params [2]unsafe.Pointer
	undo   undoList
}

// openBurner loads the burn kernel on device ordinal of drv, for one
// block per SM of its sms.
func openBurner(drv *driver.Driver, ordinal, sms int) (*burner, error) {
	var err error
	b := &burner{blocks: sms}
	if b.ctx, err = drv.RetainPrimaryContext(ordinal); err != nil {
		return nil, err
	}
	b.undo.add(b.ctx.Release)
	if b.module, err = b.ctx.LoadModule(append([]byte(burnPTX), 0)); err == nil {
		b.undo.add(func() error { return b.ctx.UnloadModule(b.module) })
		b.fn, err = b.ctx.Function(b.module, "burn")
	}
	if err == nil {
		// All shared memory, none of it used: the exchange's kernels (which
		// use some) need no other carveout to join its blocks on an SM.
		err = b.ctx.SetFuncAttribute(b.fn, driver.FuncAttrSharedCarveout, 100)
	}
	if err == nil {
		err = b.timed.open(b.ctx, &b.undo)
	}
	if err == nil {
		if b.out, err = b.ctx.MemAlloc(4); err == nil {
			b.undo.add(func() error { return b.ctx.MemFree(b.out) })
		}
	}
	if err != nil {
		return nil, errors.Join(err, b.close())
	}
	b.args.out = uint64(b.out)
	b.params = [2]unsafe.Pointer{unsafe.Pointer(&b.args.out), unsafe.Pointer(&b.args.iters)}
	return b, nil
}

// launch enqueues iters rounds of the burn kernel between the timing
// events, without waiting.
func (b *burner) launch(iters uint32) error {
	b.args.iters = iters
	return b.timed.enqueue(func() error {
		return b.ctx.Launch(b.fn, [3]uint32{uint32(b.blocks), 1, 1}, [3]uint32{burnThreads, 1, 1}, 0, b.timed.stream, b.params[:])
	})
}

// elapsed waits for the last launch and returns how long it ran.
func (b *burner) elapsed() (time.Duration, error) { return b.timed.elapsed() }

// run is launch and elapsed.
func (b *burner) run(iters uint32) (time.Duration, error) {
	if err := b.launch(iters); err != nil {
		return 0, err
	}
	return b.elapsed()
}

// close releases everything openBurner made, last first.
func (b *burner) close() error { return b.undo.run() }

// openRankBurner opens the burn kernel on m's GPU (by default the rank
// modulo the GPUs, as a Comm's), one block per SM, for bench --overlap.
// It must be opened before the process has any Comm and closed after it
// has none (closeAfterComms): loading and unloading its module and freeing
// its memory wait for every kernel of the device's context, and a kernel
// of a Comm may be waiting for a peer. With every rank in this process
// (--single-process) that peer may be the rank doing the wait, which then
// waits until the Comm's timeout: opened and closed with each Comm, as it
// was, ranks sharing a GPU failed after 10 s ("rank 0 waited 10s in Close
// for rank 1 to close too"). It refuses to open while a Comm is live.
func openRankBurner(m *member) (*burner, error) {
	if n := device.LiveShares(); n > 0 {
		return nil, fmt.Errorf("the overlap's burn kernel: not loaded while Comms of this process are live on %d GPUs: its load waits for their kernels", n)
	}
	drv, err := driver.Load()
	if err != nil {
		return nil, fmt.Errorf("the overlap's burn kernel: %w", err)
	}
	ordinal := 0
	if m.device != nil {
		ordinal = *m.device
	} else {
		n, err := drv.RequireDevices()
		if err != nil {
			return nil, fmt.Errorf("the overlap's burn kernel: %w", err)
		}
		ordinal = m.rank % n
	}
	sms, err := drv.DeviceAttribute(ordinal, driver.AttrMultiprocessorCount)
	if err == nil {
		var b *burner
		if b, err = openBurner(drv, ordinal, sms); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("the overlap's burn kernel on GPU %d: %w", ordinal, err)
}

// closeAfterComms closes the burner of openRankBurner once the process
// has no Comm. Closed while one is live, it still releases everything
// but says so: its waits could have stalled that Comm's peers.
func (b *burner) closeAfterComms() error {
	var early error
	if n := device.LiveShares(); n > 0 {
		early = fmt.Errorf("the overlap's burn kernel was closed while Comms of this process were live on %d GPUs: its unload waits for their kernels", n)
	}
	return errors.Join(early, b.close())
}

// timeOverlap measures op's back-to-back run (iters operations of fn)
// while the burn kernel runs beside it, sized to last as long as the
// exchange alone (st.BackToBack, already measured): it fills in how much
// longer each took than alone.
func timeOverlap(comm *a2a.Comm, b *burner, iters int, fn func(int) error, st *opStats) error {
	alone := time.Duration(st.BackToBack * float64(iters) * float64(time.Microsecond))
	cal, err := b.run(burnCalibration)
	if err != nil || cal <= 0 {
		return fmt.Errorf("burn kernel calibration: %v", err)
	}
	n := uint32(max(1, min(1<<31-1, int64(float64(burnCalibration)*float64(alone)/float64(cal)))))
	burnAlone, err := b.run(n)
	if err != nil {
		return err
	}
	if err := b.launch(n); err != nil {
		return err
	}
	exchange, err := timing.BackToBack(comm, timing.Own, iters, fn)
	if err != nil {
		return err
	}
	burnWith, err := b.elapsed()
	if err != nil {
		return err
	}
	st.OverlapExchange = float64(exchange) / float64(time.Microsecond)
	st.OverlapComputeSlowdown = float64(burnWith)/float64(burnAlone) - 1
	st.OverlapExchangeSlowdown = st.OverlapExchange/st.BackToBack - 1
	return nil
}
