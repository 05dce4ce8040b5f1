package main

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// phaseNames are the phases --nccl-self times, as the table and the JSON
// name them (nccltransport.PhaseOwn onwards).
var phaseNames = [...]string{nccltransport.PhaseOwn: "own", nccltransport.PhasePack: "pack", nccltransport.PhaseGroup: "group", nccltransport.PhaseUnpack: "unpack",
	nccltransport.PhaseEncode: "encode", nccltransport.PhaseDecode: "decode"}

// phaseTimes are the medians over --iters operations of each phase's
// device time, summed over an operation's rounds, in microseconds.
type phaseTimes struct {
	Own    float64 `json:"own_us"`
	Pack   float64 `json:"pack_us"`
	Group  float64 `json:"group_us"`
	Unpack float64 `json:"unpack_us"`
	// The fp8 wire's quantization before and decode after (0 without it).
	Encode float64 `json:"encode_us"`
	Decode float64 `json:"decode_us"`
}

// phaseMarker is the bench's nccltransport.PhaseMarker: while armed, it
// records a timing event on the operation's stream at every mark of this
// process's one rank, so that the time between two marks is the later
// phase's.
type phaseMarker struct {
	ctx *driver.Context

	mu     sync.Mutex
	armed  bool
	pool   []driver.Event // created events, reused per operation
	used   int
	phases []nccltransport.Phase
	err    error
}

// Mark records an event for p on s while armed (the transport calls it
// with the context current).
func (m *phaseMarker) Mark(_ int, p nccltransport.Phase, s driver.Stream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.armed || m.err != nil {
		return
	}
	if m.used == len(m.pool) {
		e, err := m.ctx.EventCreate(true)
		if err != nil {
			m.err = err
			return
		}
		m.pool = append(m.pool, e)
	}
	if err := m.ctx.EventRecord(m.pool[m.used], s); err != nil {
		m.err = err
		return
	}
	m.used++
	m.phases = append(m.phases, p)
}

// arm starts recording one operation's marks.
func (m *phaseMarker) arm() {
	m.mu.Lock()
	m.armed, m.used, m.phases = true, 0, m.phases[:0]
	m.mu.Unlock()
}

// collect stops recording and returns the operation's time per phase,
// after its events are done.
func (m *phaseMarker) collect() ([len(phaseNames)]time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armed = false
	var per [len(phaseNames)]time.Duration
	if m.err != nil {
		return per, m.err
	}
	if m.used == 0 || m.phases[0] != nccltransport.PhaseStart {
		return per, fmt.Errorf("the NCCL transport marked no phases: is --nccl-self's transport in use?")
	}
	if err := m.ctx.EventSynchronize(m.pool[m.used-1]); err != nil {
		return per, err
	}
	for i := 1; i < m.used; i++ {
		d, err := m.ctx.EventElapsed(m.pool[i-1], m.pool[i])
		if err != nil {
			return per, err
		}
		per[m.phases[i]] += d
	}
	return per, nil
}

// close destroys the events.
func (m *phaseMarker) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.pool {
		_ = m.ctx.EventDestroy(e)
	}
	m.pool = nil
}

// timePhases runs iters operations of fn one at a time on comm, each
// marked and waited for, and returns each phase's median.
func timePhases(comm *a2a.Comm, m *phaseMarker, iters int, fn func(int) error) (phaseTimes, error) {
	per := make([][]float64, len(phaseNames))
	for i := range iters {
		m.arm()
		err := fn(i)
		if err == nil {
			err = comm.Sync()
		}
		d, cerr := m.collect()
		if err == nil {
			err = cerr
		}
		if err != nil {
			return phaseTimes{}, err
		}
		for p := range per {
			per[p] = append(per[p], float64(d[p])/float64(time.Microsecond))
		}
	}
	med := func(p nccltransport.Phase) float64 {
		slices.Sort(per[p])
		return median(per[p])
	}
	return phaseTimes{Own: med(nccltransport.PhaseOwn), Pack: med(nccltransport.PhasePack),
		Group: med(nccltransport.PhaseGroup), Unpack: med(nccltransport.PhaseUnpack),
		Encode: med(nccltransport.PhaseEncode), Decode: med(nccltransport.PhaseDecode)}, nil
}

// bind gives the marker the primary context of comm's device, once: the
// bench's ranks each have one device for the process's life.
func (m *phaseMarker) bind(comm *a2a.Comm) error {
	if m.ctx != nil {
		return nil
	}
	drv, err := driver.Load()
	if err != nil {
		return err
	}
	ctx, err := drv.RetainPrimaryContext(comm.Device().Info().Ordinal)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	return nil
}

// writePhaseTable prints the --nccl-self phases of the rows that have
// them: the median device time of each, and their sum.
func writePhaseTable(w io.Writer, rows []benchRow) {
	head := false
	for _, r := range rows {
		p := r.Phases
		if p == nil {
			continue
		}
		if !head {
			fmt.Fprintf(w, "NCCL transport phases (--nccl-self), median device time per operation, us (encode and decode: the fp8 wire's); NCCL's own send to itself and ncclAlltoAll of the bytes (world one), and the same send on a window and ncclAlltoAll of the zero-CTA policy (0: not in this NCCL):\n%-16s %-6s %-5s %10s %8s %8s %8s %8s %8s %8s %8s %8s %9s %9s %9s %9s\n",
				"op", "dtype", "wire", "bytes", "encode", "own", "pack", "group", "unpack", "decode", "sum", "median", "nccl-self", "alltoall", "window", "cta0-a2a")
			head = true
		}
		var ref ncclReference
		if r.NCCLReference != nil {
			ref = *r.NCCLReference
		}
		wire := r.Wire
		if wire == "" {
			wire = "exact"
		}
		sum := p.Encode + p.Own + p.Pack + p.Group + p.Unpack + p.Decode
		fmt.Fprintf(w, "%-16s %-6s %-5s %10s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %9.1f %9.1f %9.1f %9.1f\n", r.Op, r.DType, wire, formatBytes(float64(r.BytesPerRank)),
			p.Encode, p.Own, p.Pack, p.Group, p.Unpack, p.Decode, sum, r.MedianUS, ref.SendSelfUS, ref.AlltoAllUS, ref.WindowSendSelfUS, ref.ZeroCTAAlltoAllUS)
		if ref.Note != "" {
			fmt.Fprintf(w, "  (%s)\n", ref.Note)
		}
	}
}
