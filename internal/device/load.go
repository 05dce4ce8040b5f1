package device

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Loading a module waits for every kernel on the device (docs/DESIGN.md,
// "What waits for what"), so a family of PTX loaded on first use (the
// path of a GPU without machine code) is loaded only when no Comm of the
// process there has work queued, in windows (idle.go), for at most the
// caller's timeout. The first operation of a kind on such a GPU therefore
// waits for the process's queued operations on the device.

// load loads the family of m's entry i once no member of s has work
// queued, waiting for at most timeout; loads are made one at a time.
func (s *Share) load(m *moduleSet, i int, timeout time.Duration) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if m.fns[i].Load() != 0 {
		return nil // loaded while this caller waited for loadMu
	}
	fam := m.famOf[i]
	deadline := time.Now().Add(timeout)
	var err error
	loaded := inWindows(func(window time.Duration) bool {
		return s.whenIdle(min(window, time.Until(deadline)), func() { err = m.loadFamily(fam) })
	}, func(d time.Duration) bool {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(d, time.Until(deadline)))
		return true
	})
	if !loaded {
		return fmt.Errorf("a2a: loading the %s kernels of %s (PTX, compiled by the driver) waited %v for the operations this process had queued on GPU %d: %w",
			m.fams[fam], m.file.Name, timeout, s.Ordinal, api.ErrTimeout)
	}
	return err
}
