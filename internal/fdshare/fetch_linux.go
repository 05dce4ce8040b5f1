package fdshare

import (
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Fetch dials the socket of the buffer keyed key, proves the key, and
// returns the descriptor its owner hands over, which the caller must
// close, with the size of the allocation the owner claims (to be checked:
// the import and the mapping are the proof). It gives up at deadline.
// Every failure matches api.ErrShare, and leaves no descriptor open.
func Fetch(key []byte, deadline time.Time) (fd int, size uint64, err error) {
	d := net.Dialer{Deadline: deadline}
	conn, err := d.Dial("unix", socketName(key))
	if err != nil {
		return -1, 0, shareError("dialing the owner's socket (is its process alive?)", err)
	}
	c := conn.(*net.UnixConn)
	defer c.Close()
	if err := c.SetDeadline(deadline); err != nil {
		return -1, 0, shareError("setting the deadline", err)
	}
	if !sameUser(c) {
		return -1, 0, fmt.Errorf("a2a: the buffer's socket is held by a process of another user: %w", api.ErrShare)
	}
	ss := session{key: key, peer: newNonce()}
	if _, err := c.Write(hello(ss.peer)); err != nil {
		return -1, 0, shareError("sending the hello", err)
	}
	var ch [challengeSize]byte
	if _, err := io.ReadFull(c, ch[:]); err != nil {
		return -1, 0, shareError("reading the owner's challenge", err)
	}
	copy(ss.server[:], ch[:nonceSize])
	if !ss.verify(labelProof, nil, ch[nonceSize:]) {
		return -1, 0, fmt.Errorf("a2a: the buffer's socket does not prove the group's key: %w", api.ErrShare)
	}
	if _, err := c.Write(ss.mac(labelAuth, nil)); err != nil {
		return -1, 0, shareError("sending the proof", err)
	}
	return receive(c, &ss)
}

// receive reads the give message and its one descriptor.
func receive(c *net.UnixConn, ss *session) (int, uint64, error) {
	msg := make([]byte, giveSize)
	oob := make([]byte, syscall.CmsgSpace(4*4)) // room for more than one, to see them and close them
	n, oobn, flags, _, err := c.ReadMsgUnix(msg, oob)
	fds, perr := parseRights(oob[:oobn])
	if err == nil && n < giveSize {
		_, err = io.ReadFull(c, msg[n:])
	}
	switch {
	case err != nil:
		err = shareError("reading the owner's answer (did its process die?)", err)
	case perr != nil:
		err = shareError("reading the descriptors", perr)
	case flags&syscall.MSG_CTRUNC != 0 || len(fds) != 1:
		err = fmt.Errorf("a2a: the owner sent %d descriptors (truncated: %v), want 1: %w", len(fds), flags&syscall.MSG_CTRUNC != 0, api.ErrShare)
	case !ss.verify(labelGive, msg[:8], msg[8:]):
		err = fmt.Errorf("a2a: the owner's answer has a wrong MAC: %w", api.ErrShare)
	}
	if err != nil {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return -1, 0, err
	}
	return fds[0], beUint64(msg[:8]), nil
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
