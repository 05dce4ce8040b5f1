package driver

import "unsafe"

// Launch enqueues kernel f on stream s (cuLaunchKernel) with the given grid
// and block dimensions and dynamic shared memory. params holds one pointer
// per kernel parameter, each to that parameter's value; it may be empty.
//
// Launch itself does not allocate. params and the values it points to are
// handed to C, so the compiler moves them to the heap: build them once and
// reuse them to keep a launch loop allocation-free.
func (c *Context) Launch(f Function, grid, block [3]uint32, sharedBytes uint32, s Stream, params []unsafe.Pointer) error {
	if err := c.enter(); err != nil {
		return err
	}
	pp := unsafe.Pointer(unsafe.SliceData(params))
	r := c.d.callKeep(c.d.fn.launchKernel, pp, uintptr(f),
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(sharedBytes), uintptr(s), uintptr(pp), 0)
	c.leave()
	return c.d.check("cuLaunchKernel", r)
}
