// Package fdshare hands a buffer's file descriptor (a CUDA allocation
// exported as a POSIX fd) to the peers of its group on the same host, over
// a Unix-domain socket with SCM_RIGHTS. It knows nothing of the driver:
// the owner's Server calls an export function per request, and Fetch
// returns the received descriptor for the caller to import and close.
//
// # The socket
//
// The owner listens on a socket in Linux's abstract namespace, named from
// the key (the buffer's 16-byte random ID, which only the group's handles
// carry) through HMAC-SHA256, so that the name reveals nothing of the key.
// An abstract socket has no file to clean up: it goes with the process,
// killed or not. Any process of the network namespace may connect to it,
// so the server accepts only connections from its own user
// (SO_PEERCRED) and hands the descriptor only to one that proves the key:
//
//	peer                                      owner
//	hello      "ULYF", version, nonce_p   ->
//	                                      <-  challenge  nonce_o, MAC("proof")
//	auth       MAC("auth")                ->
//	                                      <-  give       size, MAC("give", size) + one fd (SCM_RIGHTS)
//
// Every MAC is HMAC-SHA256 under the key over a label, both nonces and
// the data named. The peer checks the owner's proof before it proves
// anything itself, so a process that took the name first learns nothing
// and cannot hand it a descriptor that passes; the owner checks the
// peer's proof before it exports. Nothing received is trusted: a message
// of the wrong length, a wrong MAC, or any count of descriptors other than
// one (all are closed) fails the fetch with api.ErrShare.
//
// # Costs
//
// A Server costs a listening socket and a goroutine, and each connection
// a descriptor and a goroutine while it lasts: another user's is closed
// as it is accepted, and at most MaxConns of its own user's are served at
// once (more are closed unanswered), each bounded by the timeout. The owner's
// exported descriptor is closed as soon as it is sent; a descriptor that
// dies in flight (its receiver gone) is closed by the kernel.
package fdshare
