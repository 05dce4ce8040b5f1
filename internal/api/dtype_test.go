package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDTypeSizeStringValid(t *testing.T) {
	cases := []struct {
		d     DType
		size  int
		name  string
		valid bool
	}{
		{BFloat16, 2, "bf16", true},
		{Float16, 2, "fp16", true},
		{Float8E4M3, 1, "fp8e4m3", true},
		{Float8E5M2, 1, "fp8e5m2", true},
		{DType(0), 0, "DType(0)", false},
		{DType(5), 0, "DType(5)", false},
		{DType(255), 0, "DType(255)", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.size, c.d.Size())
			assert.Equal(t, c.name, c.d.String())
			assert.Equal(t, c.valid, c.d.Valid())
		})
	}
}

func TestParseDTypeRoundTrip(t *testing.T) {
	for _, d := range []DType{BFloat16, Float16, Float8E4M3, Float8E5M2} {
		got, err := ParseDType(d.String())
		require.NoError(t, err, d.String())
		assert.Equal(t, d, got, d.String())
	}
}

func TestParseDTypeAliases(t *testing.T) {
	aliases := map[string]DType{
		"bf16":          BFloat16,
		"bfloat16":      BFloat16,
		"fp16":          Float16,
		"float16":       Float16,
		"half":          Float16,
		"fp8":           Float8E4M3,
		"fp8e4m3":       Float8E4M3,
		"float8_e4m3fn": Float8E4M3,
		"fp8e5m2":       Float8E5M2,
		"float8_e5m2":   Float8E5M2,
	}
	for s, want := range aliases {
		got, err := ParseDType(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
}

func TestParseDTypeUnknown(t *testing.T) {
	for _, s := range []string{"", "fp32", "bf16 ", "float8", "DType(0)", "int8"} {
		d, err := ParseDType(s)
		require.Error(t, err, "%q", s)
		assert.ErrorIs(t, err, ErrDType, "%q", s)
		assert.Contains(t, err.Error(), "unknown dtype", "%q", s)
		assert.Contains(t, err.Error(), "want bf16, fp16, fp8 or fp8e5m2", "the valid names, %q", s)
		assert.Equal(t, DType(0), d, "%q", s)
		assert.False(t, d.Valid())
	}
}

// Names are read in any case.
func TestParseDTypeAnyCase(t *testing.T) {
	for s, want := range map[string]DType{"BF16": BFloat16, "BFloat16": BFloat16, "FP8": Float8E4M3, "Fp8E5M2": Float8E5M2, "HALF": Float16} {
		got, err := ParseDType(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
}
