// Package plan decides, on the CPU and before anything is enqueued, what
// an operation does, from its row of the table of operations
// (Operations): its checks (shapes, heads, token counts, capacity),
// the verdict every rank reaches alike, the signature the kernels compare
// across ranks, the vector width and block counts of the kernels, the
// copy-engine boxes, and the layout of the buffer it writes into. It
// knows nothing of the driver or the transports, which carry out its
// Plan; its tests run it alone.
package plan
