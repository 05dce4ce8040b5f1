package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTransportString(t *testing.T) {
	assert.Equal(t, "ipc", TransportIPC.String())
	assert.Equal(t, "nccl", TransportNCCL.String())
	assert.Equal(t, "auto", TransportAuto.String())
	assert.Equal(t, "Transport(?)", Transport(3).String())
	assert.Equal(t, TransportIPC, Config{}.Transport, "the zero value is today's IPC")
}
