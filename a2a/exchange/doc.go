// Package exchange all-gathers small byte blobs (CUDA IPC handles and the
// like) among P ranks before they can talk over GPU memory.
//
// Local serves ranks that are goroutines of one process. TCP implements
// the round over a star: rank 0 listens, ranks 1..P-1 dial it. Each peer
// and rank 0 first prove to each other that they hold the group's secret
// (TCPConfig.Secret, which every rank must have), then the peer sends its
// blob; once rank 0 has every blob it sends each peer the full list,
// waits until every peer has acknowledged it, and then commits the round.
//
// # Authentication
//
// Each connection in each round gets two fresh 32-byte nonces from
// crypto/rand: the peer's, in its hello, and rank 0's, in its challenge.
// Every MAC is HMAC-SHA256 keyed with the secret over a label naming what
// it stands for, the protocol version, the rank and world size the peer's
// hello claims, both nonces and, for the blob and the result, the bytes
// they protect; receivers compare MACs in constant time (hmac.Equal). The
// secret never crosses the wire, and a MAC is good for one connection of
// one round only.
//
//	peer                                       rank 0
//	hello      nonce_p                      ->
//	                                        <- challenge  nonce_0, MAC("proof")
//	auth       MAC("auth")                  ->
//	blob       blob, MAC("blob", blob)      ->
//	                                        <- result     blobs, MAC("result", blobs)
//	ack        MAC("ack")                   ->
//	                                        <- commit     MAC("commit")
//
// A peer checks rank 0's proof before it sends its blob, so a process
// listening on the address in rank 0's place learns no blob; rank 0
// checks the peer's proof before it reads the blob or lets the hello claim
// a rank, so a process without the secret can neither join a round nor
// poison one: its connection is dropped (and ignored by the round) when
// its proof is missing or wrong, whatever rank or world size its hello
// claims, nor keep the group from forming by holding rank 0's connection
// slots: a full rank 0 closes a connection that has not proved the secret,
// once it has had its grace, to make room for a newcomer (see Limits on
// rank 0). A peer
// whose secret differs tells rank 0, in place of its proof, that rank 0's
// proof is wrong, so that rank 0 can name it (ErrAuth). A hello that
// proves the secret but disagrees with the group (another world size, a
// rank out of range or already claimed) is a bug in a rank of the group:
// rank 0 fails the round and tells every peer that proved the secret, and
// the offender, why with an error frame, so they fail fast instead of
// waiting for their deadline.
//
// NewTCP refuses a config without a secret (ErrNoSecret), on loopback
// addresses too: with an empty key anyone who reaches the address, any
// local user included, could join the group and read its blobs. Nothing
// is encrypted: a process that can read the traffic (root on the host, or
// anyone on the network path) sees the blobs, and so does one that relays
// a peer's frames to rank 0 and back (which needs the peer to dial it
// instead of rank 0).
//
// Error frames are not authenticated: they can only make a round fail, a
// peer dial again (code 6), or rank 0 count a connection as one that
// failed to prove the secret (which it is). A peer does not trust anything
// else before rank 0's proof.
//
// # Limits on rank 0
//
// During a round rank 0 holds at most TCPConfig.MaxConns connections open
// (default 4P+16), the peers' included. A connection that has not proved
// the secret may lose its place to a newcomer once it has had its grace,
// which counts only time that rank 0 spends waiting on it: 10 ms (at most
// a quarter of AuthTimeout) waiting for its hello, from when rank 0 starts
// to read it (an honest peer sends its hello with its first bytes, so rank
// 0 finds it there), and a quarter of AuthTimeout (250 ms by default)
// waiting for its proof, from when rank 0 sent the challenge. While rank 0
// has not yet started to read a connection, or works on what it read, the
// connection is safe; one that proved the secret is never closed to make
// room (at most P-1 have). When a newcomer finds MaxConns open, rank 0
// closes the connection whose grace ended first, those waited on for a
// hello before those challenged; if no grace has ended, it holds the
// newcomer, and accepts no other, until one does or a connection leaves:
// later connections wait in the listener's backlog, in the order they
// came. So no flood of connections, hellos or proofs can close a peer's
// connection while rank 0 waits for its proof within the grace, and
// strangers that send a hello and then nothing hold each place for about
// a quarter of AuthTimeout: N of them delay a peer by about
// N/(MaxConns-P+1) times that (2.2 s for 256 with the defaults and P =
// 4). A connection that rank 0 challenged and closes before it took the
// blob, to make room or at a deadline, gets an error frame first (code
// 6), so that an honest peer, which may have sent its proof and blob,
// knows that rank 0 took neither; such a peer, or one whose connection
// was closed before any answer to its hello, dials again after a pause
// that starts at DialInterval, doubles up to 8 times that, and is drawn
// from the upper half of its span.
//
// Each open connection costs a file descriptor and a goroutine, so while a
// round waits for blobs it holds at most MaxConns+2 descriptors (with the
// listener and the newcomer it holds) and at most 2*MaxConns+2 goroutines
// (those of evicted connections still exiting, the accept loop and the
// caller's: the accept loop waits while there are more); once it has every
// blob it closes the other connections and holds P descriptors and P
// goroutines (one per peer, the listener and the caller's), and at most
// one connection accepted as the round ends, kept for the next round. A
// flood of more connections at once than the listener's backlog holds (on
// Linux, net.core.somaxconn) makes the kernel drop new connection
// attempts, a peer's too, which the peer's kernel repeats 1 s later, then
// 2 s after that, and so on. Before a connection proves the secret rank 0
// reads at most a 52-byte hello and a 52-byte proof from it: a frame
// announcing a longer payload is dropped unread, so unauthenticated
// connections hold at most 104 bytes of frames each, MaxConns*104 bytes in
// all. A connection must deliver its hello and its proof within
// TCPConfig.AuthTimeout (default 1 s) of being accepted, and its blob
// within TCPConfig.HelloTimeout (default 10 s), or the context's deadline
// if sooner; a peer must acknowledge the result within HelloTimeout too.
// Frame payloads are read as they arrive (decodeFrame holds at most 64 KiB
// beyond the bytes received).
//
// # One verdict per round
//
// A round succeeds on every rank or fails on every rank. Rank 0 decides:
// it commits only once every peer has acknowledged a result it checked
// (the MAC, the world size, its own blob), and a peer returns the result
// only on rank 0's commit. If rank 0 cannot deliver a result, a peer
// refuses it (with an error frame saying why) or does not acknowledge it
// in time, rank 0 aborts: it sends every peer an error frame instead of
// the commit, and every rank fails. Rank 0 and the peers also fail every
// other way a round can end early (a context's end, Close, a
// disagreeing hello) before any commit, so they agree.
//
// No protocol can close the last gap (the two generals): a peer whose
// connection fails, or whose context ends, after it acknowledged the
// result and before rank 0's commit reaches it, fails ("acknowledged the
// result but got no commit") although rank 0 and the other peers succeed. That takes the
// connection to break within one round trip at the very end of the round;
// such a peer cannot know the verdict, and should treat the group as
// broken (as after any failure of a round).
//
// # Errors
//
// Errors read "exchange: <what happened>: <cause>", where the cause is one
// of the sentinels (ErrProtocol, ErrFrameTooLarge, ErrWorldSize, ErrRank,
// ErrAuth, ErrClosed, ErrNoSecret), the context's error, or an I/O error;
// errors.Is matches it. Rank 0's error when its context ends also matches
// ErrAuth if a connection failed to prove the secret in that round. A peer failed by rank 0's error frame matches the sentinel
// named by the frame's code (see below), whatever the message says.
//
// # Wire format
//
// Every frame is, big-endian:
//
//	magic   [4]byte  "ULYX"
//	version uint16   3
//	kind    uint16   see below
//	rank    uint32   sender's rank (0 from rank 0)
//	world   uint32   sender's world size
//	length  uint32   payload length
//	payload [length]byte
//
// The kinds and their payloads are
//
//	1 hello      peer -> rank 0   nonce_p [32]
//	4 challenge  rank 0 -> peer   nonce_0 [32], MAC("proof") [32]
//	5 auth       peer -> rank 0   MAC("auth") [32]
//	6 blob       peer -> rank 0   blob, MAC("blob", blob) [32]
//	2 result     rank 0 -> peer   blob list, MAC("result", blob list) [32]
//	7 ack        peer -> rank 0   MAC("ack") [32]
//	8 commit     rank 0 -> peer   MAC("commit") [32]
//	3 error      either way       code, message
//
// where a blob list is P records of (uint32 length, bytes) for ranks
// 0..P-1, and MAC(label, data) is HMAC-SHA256 under the secret of
//
//	label || 0x00 || version uint16 || rank uint32 || world uint32 || nonce_p || nonce_0 || data
//
// with the rank and world size of the peer's hello. An error frame's
// payload is
//
//	code    uint8    0 = none, 1 = ErrProtocol, 2 = ErrFrameTooLarge, 3 = ErrWorldSize, 4 = ErrRank, 5 = ErrAuth, 6 = dial again
//	message [length-1]byte  UTF-8, at most 4096 bytes
//
// Rank 0 sends error frames to peers that proved the secret, to a hello
// of another protocol version, and (code 6) to a connection that it
// challenged and closes before it took the blob (to make room, or at a
// deadline); a peer sends one in place of its
// acknowledgement when it refuses the result, and one of code 5 and at
// most 31 bytes of message in place of its proof when rank 0's proof is
// wrong. A receiver treats an unknown code, or an error payload too short
// for a code, as ErrProtocol (a peer of an older build that gets code 6
// fails with ErrProtocol).
// Version 1 had no code (the message was the whole payload) and version 2
// no authentication or commit; a frame of any other version is
// ErrProtocol, so ranks running different versions fail with ErrProtocol
// rather than misread each other.
package exchange
