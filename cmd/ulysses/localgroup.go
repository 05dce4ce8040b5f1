package main

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
)

// benchInProcess runs benchRun for every rank as a goroutine of this
// process, rank r on devices[r], and returns rank 0's results. A rank
// that fails quits the group, so the others' rounds fail too. With
// --overlap every rank's burn kernel is opened before the ranks start and
// closed once all of them are done: its module's load and unload, and
// the free of its memory, wait for all of the device's work, which here
// is also the other ranks' (openRankBurner).
func benchInProcess(o *benchOpts, plan benchPlan, devices []int, stderr io.Writer) (res *benchResults, err error) {
	x := exchange.NewLocal(len(devices))
	members := make([]*member, len(devices))
	for r := range devices {
		members[r] = &member{rank: r, world: len(devices), device: a2a.DeviceOrdinal(devices[r]), ex: x.Rank(r)}
	}
	if o.overlap {
		defer func() {
			for _, m := range members {
				if m.burn != nil {
					err = errors.Join(err, m.burn.closeAfterComms())
				}
			}
		}()
		for _, m := range members {
			if m.burn, err = openRankBurner(m); err != nil {
				return nil, fmt.Errorf("rank %d: %w", m.rank, err)
			}
		}
	}
	results := make([]*benchResults, len(devices))
	errs := make([]error, len(devices))
	var wg sync.WaitGroup
	for r, m := range members {
		wg.Go(func() {
			results[r], errs[r] = benchRun(m, o, plan, stderr)
			if errs[r] != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, errs[r])
				m.ex.Close()
			}
		})
	}
	wg.Wait()
	return results[0], errors.Join(errs...)
}
