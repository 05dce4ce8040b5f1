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
// # Wire format
//
// Every frame is, big-endian:
//
//	magic   [4]byte  "ULYX"
//	version uint16   1
//	kind    uint16   1 = hello (peer -> rank 0), 2 = result, 3 = error (rank 0 -> peer)
//	rank    uint32   sender's rank
//	world   uint32   sender's world size
//	length  uint32   payload length
//	payload [length]byte
//
// A hello payload is the sender's blob; a result payload is P records of
// (uint32 length, bytes) for ranks 0..P-1 (see EncodeBlobs); an error
// payload is a UTF-8 message.
package exchange
