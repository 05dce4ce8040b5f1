package device

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Loading a module waits for every kernel on the device (docs/DESIGN.md,
// "What waits for what"), so a family of PTX loaded on first use (the
// path of a GPU without machine code) is loaded only when no Comm of the
// process there has work queued, under the launch gate, as the graveyard
// is released; until then the caller waits, polling, for at most its
// timeout. The first operation of a kind on such a GPU therefore waits
// for the process's queued operations on the device: an earlier operation
// that waits for a peer whose own operation this caller has yet to
// enqueue is not waited for past the timeout.

// loadPause bounds the sleep between two looks at the members' streams.
const loadPause = time.Millisecond

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
	pause := 20 * time.Microsecond
	for {
		s.Gate.Lock()
		if s.allIdle() {
			err := m.loadFamily(fam)
			s.Gate.Unlock()
			return err
		}
		s.Gate.Unlock()
		if time.Now().After(deadline) {
			return fmt.Errorf("a2a: loading the %s kernels of %s (PTX, compiled by the driver) waited %v for the operations this process had queued on GPU %d: %w",
				m.fams[fam], m.file.Name, timeout, s.Ordinal, api.ErrTimeout)
		}
		time.Sleep(pause)
		pause = min(2*pause, loadPause)
	}
}
