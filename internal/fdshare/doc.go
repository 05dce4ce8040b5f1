// Package fdshare hands a buffer's file descriptor (a CUDA allocation
// exported as a POSIX fd) to the peers of its group on the same host, over
// a Unix-domain socket with SCM_RIGHTS. It knows nothing of the driver:
// the owner's Server calls an export function per request, and Fetch
// returns the received descriptor for the caller to import and close.
//
// # The socket
//
// The owner listens on a socket in a directory of its own, made with mode
// 0700 under a random name in the temporary directory (TMPDIR, or /tmp);
// the handle carries the directory, and the socket's name comes from the
// key (the buffer's 16-byte random ID, which only the group's handles
// carry) through HMAC-SHA256, so that the name reveals nothing of the key.
// No process of another user can enter the directory: none can connect,
// fill the listen queue or take the name. A peer dials only a socket whose
// directory it finds owned by its own user and closed to the others, and
// both ends check that the other runs as their user (SO_PEERCRED). The
// owner hands the descriptor only to a peer that proves the key:
//
//	peer                                      owner
//	hello      "ULYF", version, nonce_p   ->
//	                                      <-  challenge  nonce_o, MAC("proof")
//	auth       MAC("auth")                ->
//	                                      <-  give       size, claim, MAC("give", size, claim) + one fd (SCM_RIGHTS)
//
// Every MAC is HMAC-SHA256 under the key over a label, both nonces and
// the data named. The peer checks the owner's proof before it proves
// anything itself, so a process that took the name first learns nothing
// and cannot hand it a descriptor that passes; the owner checks the
// peer's proof before it exports. The claim binds the descriptor to the
// owner's process, rank, world size and requested size (Claim): a peer
// refuses any other, so a handle that names another Comm's ID does not
// get that buffer mapped. Nothing received is trusted: a message of the wrong
// length, a wrong MAC, a claim other than the one expected, or any count
// of descriptors other than one (all are closed) fails the fetch with
// api.ErrShare.
//
// # Admission
//
// Processes of the owner's own user can still crowd the socket. The
// Server holds at most MaxConns connections, under internal/admit's rule:
// a connection that has not proved the key has a short grace for its
// hello and for its proof, counted only while the owner waits on it, and
// then may be evicted to make room for a newcomer; a proven one is never
// evicted. Fetch dials again, with backoff until its deadline, when a
// try is spoiled that way (a full listen queue, a connection closed
// before the proof), and says what its tries met when it gives up.
//
// # Costs
//
// A Server costs a directory, a listening socket and a goroutine, and
// each connection a descriptor and a goroutine while it lasts. The owner's
// exported descriptor is closed as soon as it is sent; a descriptor that
// dies in flight (its receiver gone) is closed by the kernel. Close
// removes the socket and the directory; a process killed leaves them in
// the temporary directory, and the first Listen of a later process of
// the same user removes them once a minute old (nobody listening).
package fdshare
