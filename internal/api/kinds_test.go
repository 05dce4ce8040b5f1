package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The kinds of transport keep the values the handle's wire format carries
// (internal/handle); the first value past the last kind, and every one
// after, has no name and is unknown.
func TestTransportKinds(t *testing.T) {
	for k, name := range map[Transport]string{0: "ipc", 1: "nccl", 2: "auto"} {
		assert.True(t, k.Known(), name)
		assert.Equal(t, name, k.String())
	}
	assert.Equal(t, [3]Transport{0, 1, 2}, [3]Transport{TransportIPC, TransportNCCL, TransportAuto})
	first := Transport(0)
	for first < 255 && first.Known() {
		first++
	}
	assert.GreaterOrEqual(t, first, Transport(3))
	for k := int(first); k < 256; k++ {
		assert.False(t, Transport(k).Known(), "%d", k)
		assert.Equal(t, "Transport(?)", Transport(k).String())
	}
}
