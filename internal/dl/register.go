package dl

import (
	"fmt"
	"reflect"
	"runtime"

	"github.com/ebitengine/purego"
)

// RegisterFunc binds the C function at fn to *fptr, a pointer to a Go
// function variable (purego.RegisterFunc), for entry points that take a
// struct by value, which purego lays out as the platform's C ABI wants.
// Where purego cannot (it panics: structs on 386 or FreeBSD, a nil fn),
// *fptr is left nil and the error names what (the entry point and why it
// needs this), the platform and purego's words. Binding costs reflection
// once; calls through *fptr go through reflection and allocate.
func RegisterFunc(fptr any, fn uintptr, what string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			f := reflect.ValueOf(fptr).Elem()
			f.Set(reflect.Zero(f.Type()))
			err = fmt.Errorf("cannot bind %s on %s/%s: %v", what, runtime.GOOS, runtime.GOARCH, v)
		}
	}()
	purego.RegisterFunc(fptr, fn)
	return nil
}
