//go:build race

package testutil

// Race says whether the binary runs under the race detector, which slows
// it several times: tests that bound a time loosen the bound by Slowdown.
const Race = true
