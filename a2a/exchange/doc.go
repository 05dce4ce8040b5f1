// Package exchange all-gathers small byte blobs (CUDA IPC handles and the
// like) among P ranks before they can talk over GPU memory.
//
// TCP implements the round over a star: rank 0 listens, ranks 1..P-1 dial it
// and send a hello frame carrying their blob, and once rank 0 has a valid
// hello from every rank it replies to each peer with the full list of blobs.
// If a well-formed hello disagrees about the world size or claims a bad or
// duplicate rank, rank 0 fails the round and tells every connected peer why
// with an error frame, so they fail fast instead of waiting for their
// deadline. Connections that send garbage are dropped without disturbing the
// round.
//
// # Errors
//
// Errors read "exchange: <what happened>: <cause>", where the cause is one
// of the sentinels (ErrProtocol, ErrFrameTooLarge, ErrWorldSize, ErrRank,
// ErrClosed), the context's error, or an I/O error; errors.Is matches it.
// A peer failed by rank 0's error frame matches the sentinel named by the
// frame's code (see below), whatever the message says.
//
// # Wire format
//
// Every frame is, big-endian:
//
//	magic   [4]byte  "ULYX"
//	version uint16   2
//	kind    uint16   1 = hello (peer -> rank 0), 2 = result, 3 = error (rank 0 -> peer)
//	rank    uint32   sender's rank
//	world   uint32   sender's world size
//	length  uint32   payload length
//	payload [length]byte
//
// A hello payload is the sender's blob; a result payload is P records of
// (uint32 length, bytes) for ranks 0..P-1; an error payload is
//
//	code    uint8    0 = none, 1 = ErrProtocol, 2 = ErrFrameTooLarge, 3 = ErrWorldSize, 4 = ErrRank
//	message [length-1]byte  UTF-8, at most 4096 bytes
//
// A receiver treats an unknown code, or an error payload too short for a
// code, as ErrProtocol. Version 1 had no code (the message was the whole
// payload); a frame of any other version is ErrProtocol, so ranks running
// different versions fail with ErrProtocol rather than misread each other.
package exchange
