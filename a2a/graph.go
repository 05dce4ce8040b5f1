package a2a

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	tp "github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// Graph is a CUDA graph holding operations of one or more Comms (and
// whatever else its capture recorded), ready to replay with Launch.
//
// A replay reads the token counts that SetRankTokens set last, so counts
// may change between replays without capturing again, within what the
// capture allows: each captured input's token dimension is the most
// tokens a replay may use (SetRankTokens refuses counts beyond it). Change
// counts only while no replay is queued or running on any rank (after
// Sync): a replay reads them when it runs. The views the captured
// operations returned keep their address at every replay. After a replay,
// the view of each Comm's last captured operation holds its output until
// that Comm's next operation or replay starts, as outside graphs; the
// view of an earlier one holds only until the Comm's next operation
// inside the graph, so read it with work captured between the two. The
// Into forms cannot be captured. Replays order with the Comms' other
// operations (Sync and Close wait for them).
type Graph struct {
	ctx   *driver.Context
	exec  driver.GraphExec
	comms []*Comm // sorted by address: the order Launch locks them in
	turns []turn  // of each Comm, in the same order

	mu     sync.Mutex
	closed bool
}

// CaptureGraph captures into a graph what record enqueues on s: the
// operations of comms enqueued there with Comm.On(s), and any work of the
// caller's. Every rank of a group must capture the same operations. No
// other operation of these Comms may be enqueued while record runs. The
// comms must share s's device. It costs a copy of the token counts and a
// graph instantiation (cuGraphInstantiateWithFlags).
//
// Consecutive operations of a Comm write alternate halves of its buffer,
// and a view keeps its address only if each replay starts on the half
// the capture started on. So Launch puts an operation that moves nothing
// (a barrier with the peers, one kernel) before a replay that would start
// on the other half: before every replay but the first of a graph with an
// odd number of a Comm's operations, and before the first replay after an
// odd number of the Comm's operations outside the graph.
func CaptureGraph(s Stream, record func() error, comms ...*Comm) (*Graph, error) {
	if len(comms) == 0 {
		return nil, fmt.Errorf("a2a: CaptureGraph needs the Comms it captures: %w", ErrConfig)
	}
	if record == nil {
		return nil, fmt.Errorf("a2a: CaptureGraph needs a record function: %w", ErrConfig)
	}
	for i, c := range comms {
		if !c.made() {
			return nil, fmt.Errorf("a2a: CaptureGraph of Comm %d: a Comm that New did not make (nil, or the zero Comm): %w", i, ErrNotConnected)
		}
	}
	// The graph keeps a context reference of its own: it may outlive its
	// Comms (and their Devices' references).
	dev := comms[0].dev
	ctx, err := dev.drv.RetainPrimaryContext(dev.info.Ordinal)
	if err != nil {
		return nil, api.WrapDriver("retaining the context", err)
	}
	g := &Graph{ctx: ctx, comms: slices.Clone(comms)}
	slices.SortFunc(g.comms, func(a, b *Comm) int { return cmpPtr(a, b) })
	g.comms = slices.Compact(g.comms)
	stream := driver.Stream(s)
	marks, err := g.beginCapture(stream)
	if err != nil {
		return nil, errors.Join(err, ctx.Release())
	}
	err = record()
	graph, endErr := g.ctx.StreamEndCapture(stream)
	if err == nil && endErr != nil {
		err = api.WrapDriver("ending the capture", endErr)
	}
	if err == nil {
		g.exec, err = g.ctx.GraphInstantiate(graph)
		if err != nil {
			err = api.WrapDriver("instantiating the graph", err)
		}
	}
	if graph != 0 {
		_ = g.ctx.GraphDestroy(graph) // the executable graph keeps what it needs
	}
	g.endCapture(marks, err == nil)
	if err != nil {
		return nil, errors.Join(err, ctx.Release())
	}
	return g, nil
}

// cmpPtr orders Comms by address.
func cmpPtr(a, b *Comm) int {
	return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
}

// captureMark is where a Comm stood when its capture began.
type captureMark struct {
	launches uint64
	captured int
}

// beginCapture checks the Comms, marks where each stands, and starts
// capturing s.
func (g *Graph) beginCapture(s driver.Stream) ([]captureMark, error) {
	marks := make([]captureMark, len(g.comms))
	for i, c := range g.comms {
		c.mu.Lock()
		err := c.usable(true)
		if err == nil && c.dev.info.Ordinal != g.comms[0].dev.info.Ordinal {
			err = fmt.Errorf("a2a: CaptureGraph of Comms on devices %d and %d: %w", g.comms[0].dev.info.Ordinal, c.dev.info.Ordinal, ErrConfig)
		}
		if err == nil && c.inCapture {
			err = fmt.Errorf("a2a: rank %d's Comm is already being captured: %w", c.cfg.Rank, ErrConfig)
		}
		if err != nil {
			c.mu.Unlock()
			g.endCapture(marks[:i], false)
			return nil, err
		}
		c.inCapture = true
		marks[i] = captureMark{launches: c.launches, captured: len(c.captured)}
		c.mu.Unlock()
	}
	if own, err := g.ctx.OwnsStream(s); err != nil || !own {
		g.endCapture(marks, false)
		return nil, fmt.Errorf("a2a: CaptureGraph on stream %#x, not one of device %d: %w", uintptr(s), g.comms[0].dev.info.Ordinal, ErrStream)
	}
	if err := g.ctx.StreamBeginCapture(s); err != nil {
		g.endCapture(marks, false)
		return nil, fmt.Errorf("a2a: beginning a capture on stream %#x: %w: %w", uintptr(s), ErrStream, err)
	}
	return marks, nil
}

// endCapture ends the Comms' capture. On success their captured
// operations belong to g, and g notes where each Comm's turns start and
// how many it takes; each Comm's count of launches goes back to where it
// stood, since nothing captured has run yet. Otherwise the captured
// operations are forgotten.
func (g *Graph) endCapture(marks []captureMark, ok bool) {
	if ok {
		g.turns = make([]turn, len(marks))
	}
	for i, m := range marks {
		c := g.comms[i]
		c.mu.Lock()
		c.inCapture = false
		if ok {
			g.turns[i] = turn{start: m.launches, ops: c.launches - m.launches}
			for j := m.captured; j < len(c.captured); j++ {
				c.captured[j].graph = g
			}
		} else {
			c.captured = c.captured[:m.captured]
		}
		c.launches = m.launches
		c.mu.Unlock()
	}
}

// turn is a Comm's part of a graph: its captured operations were numbered
// from launch count start, and ops of them run per replay.
type turn struct {
	start, ops uint64
}

// takeTurn enqueues the operation that moves nothing on s when the
// replay would otherwise start on the other half than the capture did
// (CaptureGraph). Called with c's lock held, s ordered after c's work.
func (c *Comm) takeTurn(s driver.Stream, t turn) error {
	if c.layout.HalfBytes != 0 && (c.launches-t.start)%2 == 1 {
		if err := c.t.Pad(tp.LaunchSpec{Stream: s, Half: c.halfOf(c.launches + 1)}); err != nil {
			return c.fail(api.Wrap(err, "aligning the graph's halves"))
		}
		c.launches++
	}
	return nil
}

// Launch replays the graph on s (cuGraphLaunch), ordered after the Comms'
// earlier operations and before their later ones, like an operation on
// s, preceded where CaptureGraph says by one launch that moves nothing.
// It waits for nothing and allocates nothing. A closed Graph, or one that
// CaptureGraph did not make, returns an error matching ErrClosed.
func (g *Graph) Launch(s Stream) error {
	if g == nil || g.ctx == nil {
		return fmt.Errorf("a2a: launching a Graph that CaptureGraph did not make (nil, or the zero Graph): %w", ErrClosed)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("a2a: launching a closed Graph: %w", ErrClosed)
	}
	stream := driver.Stream(s)
	// Every Comm's lock first (in address order), then the launch gates:
	// a Sync holds its Comm's lock while it may take a gate exclusively.
	for _, c := range g.comms {
		c.mu.Lock()
		defer c.mu.Unlock()
		if err := c.usable(true); err != nil {
			return err
		}
	}
	// Before the gates: a padding launch takes its share's gate itself, and
	// a second read lock of a gate held here would wait behind a waiting
	// release (Share.TryDrain) that waits for the first: a deadlock.
	for _, c := range g.comms { // busy until orderAfter (device.Member.Enqueuing, Share.BeginEnqueue)
		c.share.BeginEnqueue() // shared, and never waited for by a writer: one per Comm is safe
		defer c.share.EndEnqueue()
		c.member.Enqueuing.Store(true)
		defer c.member.Enqueuing.Store(false)
	}
	for i, c := range g.comms {
		if err := c.orderBefore(stream); err != nil {
			return err
		}
		if err := c.takeTurn(stream, g.turns[i]); err != nil {
			return err
		}
	}
	var gated []*device.Share
	for _, c := range g.comms {
		if !slices.Contains(gated, c.share) {
			gated = append(gated, c.share)
			c.share.Gate.RLock() // as every launch: no graveyard release starts meanwhile
			defer c.share.Gate.RUnlock()
		}
	}
	if err := g.ctx.GraphLaunch(g.exec, stream); err != nil {
		return fmt.Errorf("a2a: launching the graph on stream %#x: %w: %w", uintptr(stream), ErrStream, err)
	}
	var errs []error
	for i, c := range g.comms {
		c.launches += g.turns[i].ops
		if err := c.orderAfter(stream); err != nil {
			errs = append(errs, c.fail(err))
		}
	}
	return errors.Join(errs...)
}

// Close destroys the graph (it must not be replaying) and forgets its
// operations: their inputs no longer bound SetRankTokens. Idempotent; nil
// on a Graph that CaptureGraph did not make.
func (g *Graph) Close() error {
	if g == nil || g.ctx == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	for _, c := range g.comms {
		c.mu.Lock()
		c.captured = slices.DeleteFunc(c.captured, func(co capturedOp) bool { return co.graph == g })
		c.mu.Unlock()
	}
	err := g.ctx.GraphExecDestroy(g.exec)
	if err != nil {
		err = api.WrapDriver("destroying the graph", err)
	}
	if rerr := g.ctx.Release(); rerr != nil {
		err = errors.Join(err, api.WrapDriver("releasing the context", rerr))
	}
	return err
}
