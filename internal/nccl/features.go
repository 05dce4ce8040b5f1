package nccl

import (
	"errors"
	"fmt"
)

// ErrUnsupported is matched when the loaded NCCL lacks an optional
// feature a call needs (Library.Has is false for it).
var ErrUnsupported = errors.New("nccl: the loaded NCCL lacks this feature")

// Feature is an optional part of NCCL that the binding uses where the
// loaded library has it.
type Feature int

// The optional features, each with the NCCL version that brought it.
const (
	FeatureMemAlloc  Feature = iota // ncclMemAlloc, ncclMemFree (2.19)
	FeatureWindows                  // ncclCommWindowRegister, ncclCommWindowDeregister (2.27)
	FeatureAlltoAll                 // ncclAlltoAll (2.28)
	FeatureCTAPolicy                // ncclConfig_t's CTAPolicy, as read from a 2.28 config (2.28)
	FeatureSplit                    // ncclCommSplit (2.18)
)

// features are each Feature's name, first version and entry points.
var features = [...]struct {
	name    string
	version int
	fns     func(*funcs) []uintptr
}{
	FeatureMemAlloc:  {"ncclMemAlloc", 21900, func(f *funcs) []uintptr { return []uintptr{f.memAlloc, f.memFree} }},
	FeatureWindows:   {"ncclCommWindowRegister", 22700, func(f *funcs) []uintptr { return []uintptr{f.commWindowRegister, f.commWindowDeregister} }},
	FeatureAlltoAll:  {"ncclAlltoAll", 22800, func(f *funcs) []uintptr { return []uintptr{f.alltoAll} }},
	FeatureCTAPolicy: {"the CTA policy", configVersion28, func(*funcs) []uintptr { return nil }},
	FeatureSplit:     {"ncclCommSplit", 21800, func(f *funcs) []uintptr { return []uintptr{f.commSplit} }},
}

// Has reports whether the loaded NCCL has f: a version at least f's and
// every entry point of f exported. It costs nothing.
func (l *Library) Has(f Feature) bool {
	if f < 0 || int(f) >= len(features) || l.version < features[f].version {
		return false
	}
	for _, fn := range features[f].fns(&l.fn) {
		if fn == 0 {
			return false
		}
	}
	return true
}

// need is nil when the library has f, else an error matching
// ErrUnsupported that names f, its version and the library's.
func (l *Library) need(f Feature) error {
	if l.Has(f) {
		return nil
	}
	ft := features[f]
	return fmt.Errorf("nccl: %s needs NCCL %s, and %s is NCCL %s: %w", ft.name, versionString(ft.version), l.path, versionString(l.version), ErrUnsupported)
}
