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
// that fails quits the group, so the others' rounds fail too.
func benchInProcess(o *benchOpts, plan benchPlan, devices []int, stderr io.Writer) (*benchResults, error) {
	x := exchange.NewLocal(len(devices))
	results := make([]*benchResults, len(devices))
	errs := make([]error, len(devices))
	var wg sync.WaitGroup
	for r := range devices {
		m := &member{rank: r, world: len(devices), device: a2a.DeviceOrdinal(devices[r]), ex: x.Rank(r)}
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
