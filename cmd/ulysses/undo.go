package main

import "errors"

// undoList is what to undo of a set of driver resources, in the order they
// were made; run undoes them last first.
type undoList []func() error

// add records f, the undoing of the resource just made.
func (u *undoList) add(f func() error) { *u = append(*u, f) }

// run calls every recorded undo, last first, forgets them and returns
// their errors joined.
func (u *undoList) run() error {
	var errs []error
	for i := len(*u) - 1; i >= 0; i-- {
		errs = append(errs, (*u)[i]())
	}
	*u = nil
	return errors.Join(errs...)
}
