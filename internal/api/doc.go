// Package api defines the types of package a2a's API that every layer
// below it uses, the tensors, element types, kinds of transport and
// mover, and the errors, so that planning and the transports can share
// them without importing a2a. Package a2a re-exports what users see
// (Tensor, DType, the sentinels, the error types) under the same names;
// the rest (the wrapping helpers, AbortedError) is the layers' own. It
// depends on nothing of the project but the driver's and NCCL's
// sentinels, and the kernels' phase numbers.
package api
