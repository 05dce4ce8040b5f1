package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func TestParseTransport(t *testing.T) {
	for s, want := range map[string]a2a.Transport{"ipc": a2a.TransportIPC, "nccl": a2a.TransportNCCL, "auto": a2a.TransportAuto, "": a2a.TransportAuto} {
		got, err := parseTransport(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	_, err := parseTransport("mpi")
	assert.ErrorContains(t, err, `unknown --transport "mpi"`)
}

func TestParseSharing(t *testing.T) {
	for s, want := range map[string]a2a.Sharing{"default": a2a.SharingDefault, "": a2a.SharingDefault, "legacy-ipc": a2a.SharingLegacyIPC,
		"fd": a2a.SharingFD, "FD": a2a.SharingFD, "auto": a2a.SharingAuto} {
		got, err := parseSharing(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	_, err := parseSharing("ipc")
	assert.ErrorContains(t, err, `unknown --sharing "ipc"`)
}

// One rank of a group across hosts: --addr needs --world, a --rank in
// range and the group's secret; --rank and --device need --addr.
func TestGroupFlagsAcrossHosts(t *testing.T) {
	parse := func(args ...string) error {
		fs, o := newCheckFlags()
		require.NoError(t, fs.Parse(args))
		return o.group.validate()
	}
	t.Setenv(launch.EnvSecret, "")
	assert.NoError(t, parse())
	assert.NoError(t, parse("--transport", "nccl"))
	assert.ErrorContains(t, parse("--transport", "tcp"), "--transport")
	assert.ErrorContains(t, parse("--rank", "1"), "go with --addr")
	assert.ErrorContains(t, parse("--device", "0"), "go with --addr")
	assert.ErrorContains(t, parse("--addr", "10.0.0.1:29600", "--rank", "0"), "needs --world")
	assert.ErrorContains(t, parse("--addr", "10.0.0.1:29600", "--world", "2"), "needs --rank in 0..1")
	assert.ErrorContains(t, parse("--addr", "10.0.0.1:29600", "--world", "2", "--rank", "2"), "needs --rank in 0..1")
	assert.ErrorContains(t, parse("--addr", "10.0.0.1:29600", "--world", "2", "--rank", "1"), launch.EnvSecret)
	assert.ErrorContains(t, parse("--addr", "127.0.0.1:29600", "--world", "2", "--rank", "0"), launch.EnvSecret, "loopback too")
	t.Setenv(launch.EnvSecret, "0123456789abcde")
	assert.ErrorContains(t, parse("--addr", "10.0.0.1:29600", "--world", "2", "--rank", "1"), "at least 16 bytes; it has 15")
	t.Setenv(launch.EnvSecret, "0123456789abcdef0123456789abcdef")
	assert.NoError(t, parse("--addr", "10.0.0.1:29600", "--world", "2", "--rank", "1", "--device", "0", "--transport", "nccl"))
	assert.ErrorContains(t, parse("--addr", "10.0.0.1:29600", "--world", "2", "--rank", "1", "--device", "-2"), "negative")
	assert.ErrorContains(t, parse("--addr", "foo", "--world", "2", "--rank", "1"), "not host:port")

	var stderr bytes.Buffer
	t.Setenv(launch.EnvSecret, "")
	assert.Equal(t, exitUsage, checkMain([]string{"--addr", "10.0.0.1:29600", "--world", "2", "--rank", "1"}, &bytes.Buffer{}, &stderr))
	assert.Contains(t, stderr.String(), launch.EnvSecret)
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())

	fs, o := newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--addr", "10.0.0.1:29600", "--world", "2", "--rank", "0", "--compare", "nccl"}))
	_, err := o.plan()
	assert.ErrorContains(t, err, "--compare")
}

func TestRemoteMemberDevice(t *testing.T) {
	g := groupFlags{world: 2, rank: 1, device: 3, addr: "127.0.0.1:1"}
	_, err := g.remoteMember(2)
	assert.ErrorContains(t, err, "--device 3: this host has 2 GPUs")
	_, err = g.remoteMember(0)
	assert.ErrorIs(t, err, a2a.ErrNoDevice)
}
