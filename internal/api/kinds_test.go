package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The kinds of transport keep the values the handle's wire format carries
// (internal/handle): a kind past the last has no name and is unknown.
func TestTransportKinds(t *testing.T) {
	for k, name := range map[Transport]string{0: "ipc", 1: "nccl", 2: "auto"} {
		assert.True(t, k.Known(), name)
		assert.Equal(t, name, k.String())
	}
	assert.Equal(t, [3]Transport{0, 1, 2}, [3]Transport{TransportIPC, TransportNCCL, TransportAuto})
	for _, k := range []Transport{3, 128, 255} {
		assert.False(t, k.Known(), "%d", uint8(k))
		assert.Equal(t, "Transport(?)", k.String())
	}
}
