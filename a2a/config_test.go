package a2a

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// goodConfig starts from the zero value and sets only what validate needs.
func goodConfig() Config {
	var c Config
	c.WorldSize = 2
	c.Rank = 1
	c.MaxTokens = 4096
	c.HiddenDim = 1024
	c.DType = BFloat16
	return c
}

func TestConfigValidateGood(t *testing.T) {
	c := goodConfig()
	require.NoError(t, c.validate())
	assert.Nil(t, c.Device)
	assert.Zero(t, c.NumSMs)
	assert.Zero(t, c.Timeout)
	assert.Equal(t, int64(4096*1024*2), c.capacityBytes())

	// Boundaries that must still pass.
	ok := []func(*Config){
		func(c *Config) { c.WorldSize, c.Rank = 1, 0 },
		func(c *Config) { c.WorldSize, c.Rank = MaxWorldSize, MaxWorldSize-1 },
		func(c *Config) { c.Device = DeviceOrdinal(0) },
		func(c *Config) { c.Device = DeviceOrdinal(7) },
		func(c *Config) { c.MaxTokens, c.HiddenDim = 1, 1 },
		func(c *Config) { c.DType = Float8E5M2 },
		func(c *Config) { c.NumSMs = 1 },
		func(c *Config) { c.Mover = MoverCopyEngines },
		func(c *Config) { c.Transport = TransportNCCL },
		func(c *Config) { c.Transport = TransportAuto },
		func(c *Config) { c.MaxTensors = plan.MaxTensors },
		func(c *Config) { c.NumSMs = maxBlocks },
		func(c *Config) { c.Timeout = time.Nanosecond },
		func(c *Config) { c.SingleBuffer = true },
		func(c *Config) { c.Wire = WireE4M3 },
		func(c *Config) { c.Wire, c.DType, c.Mover, c.Transport = WireE5M2, Float16, MoverAuto, TransportAuto },
		func(c *Config) { c.Wire, c.Transport = WireE4M3, TransportNCCL },
		func(c *Config) { c.MaxTokens, c.HiddenDim, c.DType = 1<<20, 1<<20, Float8E4M3 }, // exactly maxDataBytes
	}
	for i, mod := range ok {
		c := goodConfig()
		mod(&c)
		assert.NoError(t, c.validate(), "case %d: %+v", i, c)
	}
}

func TestConfigValidateBad(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want error
	}{
		{"world 0", func(c *Config) { c.WorldSize, c.Rank = 0, 0 }, ErrConfig},
		{"mover 3", func(c *Config) { c.Mover = 3 }, ErrConfig},
		{"transport 3", func(c *Config) { c.Transport = 3 }, ErrConfig},
		{"max tensors 5", func(c *Config) { c.MaxTensors = plan.MaxTensors + 1 }, ErrConfig},
		{"world 9", func(c *Config) { c.WorldSize, c.Rank = 9, 0 }, ErrConfig},
		{"world -1", func(c *Config) { c.WorldSize, c.Rank = -1, 0 }, ErrConfig},
		{"rank -1", func(c *Config) { c.Rank = -1 }, ErrConfig},
		{"rank == world", func(c *Config) { c.Rank = c.WorldSize }, ErrConfig},
		{"rank > world", func(c *Config) { c.Rank = 5 }, ErrConfig},
		{"device -1", func(c *Config) { c.Device = DeviceOrdinal(-1) }, ErrConfig},
		{"max tokens 0", func(c *Config) { c.MaxTokens = 0 }, ErrConfig},
		{"max tokens -1", func(c *Config) { c.MaxTokens = -1 }, ErrConfig},
		{"hidden 0", func(c *Config) { c.HiddenDim = 0 }, ErrConfig},
		{"hidden -3", func(c *Config) { c.HiddenDim = -3 }, ErrConfig},
		{"dtype 0", func(c *Config) { c.DType = 0 }, ErrDType},
		{"dtype 9", func(c *Config) { c.DType = 9 }, ErrDType},
		{"num sms -1", func(c *Config) { c.NumSMs = -1 }, ErrConfig},
		{"num sms 1025", func(c *Config) { c.NumSMs = maxBlocks + 1 }, ErrConfig},
		{"timeout -1ns", func(c *Config) { c.Timeout = -time.Nanosecond }, ErrConfig},
		{"wire 3", func(c *Config) { c.Wire = 3 }, ErrConfig},
		{"fp8 over the fp8 wire", func(c *Config) { c.Wire, c.DType = WireE4M3, Float8E4M3 }, ErrConfig},
		{"the wire by copy engines", func(c *Config) { c.Wire, c.Mover = WireE4M3, MoverCopyEngines }, ErrConfig},
		{"over plan.MaxDataBytes", func(c *Config) { c.MaxTokens, c.HiddenDim, c.DType = 1<<20, 1<<20+1, Float8E4M3 }, ErrConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := goodConfig()
			tc.mod(&c)
			err := c.validate()
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			if tc.want == ErrDType {
				assert.NotErrorIs(t, err, ErrConfig)
			} else {
				assert.NotErrorIs(t, err, ErrDType)
			}
		})
	}
}

// A rank's blocks: every SM by default, fewer when asked, never more than
// the device's SMs nor maxBlocks.
func TestConfigBlocks(t *testing.T) {
	everySM(t) // whatever $ULYSSES_TEST_NUM_SMS asked of the suite
	for _, c := range []struct{ numSMs, sms, want int }{
		{0, 132, 132}, {32, 132, 32}, {132, 132, 132}, {264, 132, 132}, {maxBlocks, 132, 132}, {0, 2000, maxBlocks},
	} {
		cfg := goodConfig()
		cfg.NumSMs = c.numSMs
		assert.Equal(t, c.want, cfg.blocks(c.sms), "NumSMs %d on %d SMs", c.numSMs, c.sms)
	}
}

// $ULYSSES_TEST_NUM_SMS makes NumSMs 0 ask for that many SMs (a Comm's own
// NumSMs still wins); a value that is no SM count is refused and changes
// nothing.
func TestDefaultNumSMsFromEnv(t *testing.T) {
	everySM(t)
	for _, bad := range []string{"x", "0", "-3", "1025", "16 "} {
		t.Setenv(EnvTestNumSMs, bad)
		require.Error(t, SetDefaultNumSMsFromEnv(), bad)
		assert.Zero(t, defaultNumSMs, bad)
	}
	t.Setenv(EnvTestNumSMs, "16")
	require.NoError(t, SetDefaultNumSMsFromEnv())
	cfg := goodConfig()
	assert.Equal(t, 16, cfg.blocks(132), "NumSMs 0")
	assert.Equal(t, 8, cfg.blocks(8), "never more than the device's SMs")
	cfg.NumSMs = 32
	assert.Equal(t, 32, cfg.blocks(132), "a Comm's own count")
	t.Setenv(EnvTestNumSMs, "")
	defaultNumSMs = 0
	require.NoError(t, SetDefaultNumSMsFromEnv())
	assert.Zero(t, defaultNumSMs, "unset: every SM")
}

// MaxTokens*HiddenDim*elem must not wrap around int64 and slip under the
// maxDataBytes check.
func TestConfigValidateCapacityOverflow(t *testing.T) {
	c := goodConfig()
	c.MaxTokens, c.HiddenDim = 1<<62, 4 // 2^62 * 4 * 2 bytes wraps to 0
	assert.ErrorIs(t, c.validate(), ErrConfig)
}

func TestConfigTimeout(t *testing.T) {
	c := goodConfig()
	assert.Equal(t, 10*time.Second, DefaultTimeout)
	assert.Equal(t, 10*time.Second, c.timeout())
	c.Timeout = 250 * time.Millisecond
	assert.Equal(t, 250*time.Millisecond, c.timeout())
}

func TestDeviceOrdinal(t *testing.T) {
	a, b := DeviceOrdinal(3), DeviceOrdinal(3)
	require.NotNil(t, a)
	assert.Equal(t, 3, *a)
	assert.NotSame(t, a, b)
}

func TestPhaseString(t *testing.T) {
	assert.Equal(t, "start", PhaseStart.String())
	assert.Equal(t, "end", PhaseEnd.String())
	assert.Equal(t, "Phase(7)", Phase(7).String())
}

func TestTimeoutError(t *testing.T) {
	te := &TimeoutError{Rank: 3, Peer: 5, Phase: PhaseEnd, Epoch: 4242, Block: 17, Timeout: 2 * time.Second}
	msg := te.Error()
	assert.Contains(t, msg, "rank 3 ")
	assert.Contains(t, msg, "rank 5 ")
	assert.Contains(t, msg, "end barrier")
	assert.Contains(t, msg, "operation 4242")
	assert.Contains(t, msg, "block 17")
	assert.Contains(t, msg, "2s")
	assert.Equal(t, "a2a: rank 3 waited 2s for rank 5 at the end barrier of operation 4242 (block 17): barrier timed out", msg)

	var err error = te
	assert.ErrorIs(t, err, ErrTimeout)
	assert.NotErrorIs(t, err, ErrBroken)

	wrapped := fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", err))
	assert.ErrorIs(t, wrapped, ErrTimeout)
	var got *TimeoutError
	require.ErrorAs(t, wrapped, &got)
	assert.Same(t, te, got)

	// The way usable() reports a broken Comm keeps both sentinels reachable.
	broken := fmt.Errorf("%w: %w", ErrBroken, err)
	assert.ErrorIs(t, broken, ErrBroken)
	assert.ErrorIs(t, broken, ErrTimeout)

	assert.False(t, errors.Is(ErrTimeout, te), "the sentinel does not match the typed error")

	start := (&TimeoutError{Phase: PhaseStart}).Error()
	assert.Contains(t, start, "start barrier")
}

// The wire's buffer holds the outputs, a code per element and a scale
// byte per head of 8 elements or more, each part from a multiple of 256.
func TestWireCapacity(t *testing.T) {
	c := goodConfig()
	c.Wire = WireE4M3
	one := int64(4096 * 1024 * 2)
	assert.Equal(t, one+one/2+one/16, c.capacityBytes())
	c.MaxTensors = 3
	assert.Equal(t, 3*(one+one/2+one/16), c.capacityBytes())
}
