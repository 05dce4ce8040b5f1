// Package kernelabi is what the host shares with the CUDA kernels of
// gen/kernels: the constants, the by-value argument of every kernel
// (Args), and the structures both read in the Comm's buffer (State,
// Signals, Live) and in pinned host memory (Status). It knows nothing of
// collectives or of the driver. abi_gen.go is generated, with the header
// the kernels include (gen/kernels/abi.cuh), from the one description in
// spec.
package kernelabi

//go:generate go run ../../gen/abi -go abi_gen.go -c ../../gen/kernels/abi.cuh
