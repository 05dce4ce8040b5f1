package driver

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// Graph is a CUgraph; GraphExec a CUgraphExec.
type (
	Graph     uintptr
	GraphExec uintptr
)

// CaptureStatus is a CUstreamCaptureStatus.
type CaptureStatus int

// Capture states of a stream.
const (
	CaptureNone        CaptureStatus = 0 // CU_STREAM_CAPTURE_STATUS_NONE
	CaptureActive      CaptureStatus = 1 // CU_STREAM_CAPTURE_STATUS_ACTIVE
	CaptureInvalidated CaptureStatus = 2 // CU_STREAM_CAPTURE_STATUS_INVALIDATED
)

// captureModeRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: other threads'
// calls are not checked during the capture (Go moves goroutines between
// threads, and other goroutines keep using the driver).
const captureModeRelaxed = 2

// graphs reports whether the driver exports the graph calls (all optional).
// StreamBeginCapture checks it; the other graph calls take a graph that
// only a capture makes, so they need no check of their own.
func (d *Driver) graphs() error {
	for _, f := range []struct {
		addr uintptr
		name string
	}{
		{d.fn.streamBeginCapture, "cuStreamBeginCapture_v2"}, {d.fn.streamEndCapture, "cuStreamEndCapture"},
		{d.fn.streamIsCapturing, "cuStreamIsCapturing"}, {d.fn.graphInstantiate, "cuGraphInstantiateWithFlags"},
		{d.fn.graphLaunch, "cuGraphLaunch"}, {d.fn.graphExecDestroy, "cuGraphExecDestroy"},
		{d.fn.graphDestroy, "cuGraphDestroy"},
	} {
		if f.addr == 0 {
			return d.missing(f.name)
		}
	}
	return nil
}

// StreamCapturing reports s's capture state (cuStreamIsCapturing); a
// driver without graph calls reports CaptureNone. Allocation-free.
func (c *Context) StreamCapturing(s Stream) (CaptureStatus, error) {
	if c.d.fn.streamIsCapturing == 0 {
		return CaptureNone, nil
	}
	if err := c.enter(); err != nil {
		return CaptureNone, err
	}
	var st int32
	r, _, _ := purego.SyscallN(c.d.fn.streamIsCapturing, uintptr(s), uintptr(unsafe.Pointer(&st)))
	c.leave()
	return CaptureStatus(st), c.d.check("cuStreamIsCapturing", r)
}

// StreamBeginCapture starts capturing the work enqueued on s into a graph,
// in relaxed mode (cuStreamBeginCapture_v2).
func (c *Context) StreamBeginCapture(s Stream) error {
	if err := c.d.graphs(); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.streamBeginCapture, uintptr(s), captureModeRelaxed)
	c.leave()
	return c.d.check("cuStreamBeginCapture_v2", r)
}

// StreamEndCapture ends the capture on s and returns the graph
// (cuStreamEndCapture).
func (c *Context) StreamEndCapture(s Stream) (Graph, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var g Graph
	r, _, _ := purego.SyscallN(c.d.fn.streamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g)))
	c.leave()
	return g, c.d.check("cuStreamEndCapture", r)
}

// GraphInstantiate makes an executable graph of g
// (cuGraphInstantiateWithFlags, no flags).
func (c *Context) GraphInstantiate(g Graph) (GraphExec, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var e GraphExec
	r, _, _ := purego.SyscallN(c.d.fn.graphInstantiate, uintptr(unsafe.Pointer(&e)), uintptr(g), 0)
	c.leave()
	return e, c.d.check("cuGraphInstantiateWithFlags", r)
}

// GraphLaunch enqueues e on s (cuGraphLaunch). Allocation-free.
func (c *Context) GraphLaunch(e GraphExec, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.graphLaunch, uintptr(e), uintptr(s))
	c.leave()
	return c.d.check("cuGraphLaunch", r)
}

// GraphExecDestroy destroys e (cuGraphExecDestroy).
func (c *Context) GraphExecDestroy(e GraphExec) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.graphExecDestroy, uintptr(e))
	c.leave()
	return c.d.check("cuGraphExecDestroy", r)
}

// GraphDestroy destroys g (cuGraphDestroy).
func (c *Context) GraphDestroy(g Graph) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.graphDestroy, uintptr(g))
	c.leave()
	return c.d.check("cuGraphDestroy", r)
}
