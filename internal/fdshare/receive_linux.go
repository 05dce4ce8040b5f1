package fdshare

import (
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/ulysses-go/ulysses/internal/api"
)

// receive reads the give message and its one descriptor, and checks the
// owner's claim against want.
func receive(c *net.UnixConn, ss *session, want Claim) (int, uint64, error) {
	msg := make([]byte, giveSize)
	oob := make([]byte, syscall.CmsgSpace(4*4)) // room for more than one, to see them and close them
	n, oobn, flags, _, err := c.ReadMsgUnix(msg, oob)
	fds, perr := parseRights(oob[:oobn])
	if err == nil && n == 0 {
		err = io.EOF
	}
	if err == nil && n < giveSize {
		_, err = io.ReadFull(c, msg[n:])
	}
	size, claim := parseGiveBody(msg)
	switch {
	case err != nil && n == 0:
		// Evicted as it proved the key, or the owner died: the next dial tells.
		err = closedOr("closed after the proof", "reading the owner's answer", err)
	case err != nil:
		err = shareError("reading the owner's answer", err)
	case perr != nil:
		err = shareError("reading the descriptors", perr)
	case !ss.verify(labelGive, msg[:8+claimSize], msg[8+claimSize:]):
		err = fmt.Errorf("a2a: the owner's answer has a wrong MAC: %w", api.ErrShare)
	case size == 0:
		err = fmt.Errorf("a2a: the owner could not export its buffer: %w", api.ErrShare)
	case flags&syscall.MSG_CTRUNC != 0 || len(fds) != 1:
		err = fmt.Errorf("a2a: the owner sent %d descriptors (truncated: %v), want 1: %w", len(fds), flags&syscall.MSG_CTRUNC != 0, api.ErrShare)
	case claim != want:
		err = claimError(claim, want)
	}
	if err != nil {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return -1, 0, err
	}
	return fds[0], size, nil
}

// claimError says how the buffer behind a handle's ID differs from the
// one the handle describes.
func claimError(got, want Claim) error {
	process := ""
	if got.Nonce != want.Nonce {
		process = " of another process"
	}
	return fmt.Errorf("a2a: the buffer behind the handle's ID is another Comm's (rank %d of %d%s, %d bytes), not the one it describes (rank %d of %d, %d bytes): %w",
		got.Rank, got.World, process, got.Bytes, want.Rank, want.World, want.Bytes, api.ErrShare)
}

// parseRights returns every descriptor the control messages carry.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_RIGHTS {
			continue
		}
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}
