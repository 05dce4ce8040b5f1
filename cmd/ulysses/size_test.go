package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"128K": 131072, "1M": 1 << 20, "2G": 2 << 30, "4096": 4096, "8m": 8 << 20,
		"128KiB": 131072, "32MB": 32 << 20, " 1M ": 1 << 20,
	} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "K", "0", "-1M", "1.5M", "12Q", "1T", "99999999999G", "M1"} {
		_, err := parseSize(in)
		assert.Error(t, err, in)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("128K,1M,8M,32M,128M")
	require.NoError(t, err)
	assert.Equal(t, []int64{128 << 10, 1 << 20, 8 << 20, 32 << 20, 128 << 20}, got)
	_, err = parseSizes(",")
	assert.Error(t, err)
	_, err = parseSizes("1M,x")
	assert.Error(t, err)
}

func TestFormatBytes(t *testing.T) {
	assert.Equal(t, "128 KiB", formatBytes(128<<10))
	assert.Equal(t, "1 MiB", formatBytes(1<<20))
	assert.Equal(t, "1000 B", formatBytes(1000))
	assert.Equal(t, "85.3 KiB", formatBytes(float64(128<<10)*2/3))
	assert.Equal(t, "1 GiB", formatBytes(1<<30))
}
