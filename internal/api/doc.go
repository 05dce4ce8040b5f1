// Package api defines what every layer below package a2a shares: the
// layers' forms of the element types, kinds of transport and mover and
// the fp8 wire, the sentinels, and the failure types the transports
// return (TimeoutError, PeerClosedError, MismatchError, AbortedError), so
// that planning and the transports need not import a2a. Package a2a
// declares its own public types and converts at its boundary: the
// enumerations by value, the failure types where a failure enters a
// Comm. It re-exports the sentinels as they are, so errors.Is matches
// either. It depends on nothing of the project but the driver's and
// NCCL's sentinels, and the kernels' phase numbers.
package api
