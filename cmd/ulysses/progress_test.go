package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The progress writer passes every byte on, counts the steps of lines
// however they are split, and adds nothing where stderr is no terminal.
func TestProgressCountsStepsAndAddsNothingOffATerminal(t *testing.T) {
	var out, errs bytes.Buffer
	p := newProgress(&out, &errs, "check: cases", 3, isCaseLine)
	in := "[rank 0] PASS a 1ms\n[rank 1] PA" + "SS a 1ms\n[rank 0] some other line\n[rank 1] FAIL b: x\n"
	for _, chunk := range []string{in[:7], in[7:30], in[30:]} {
		n, err := p.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	p.finish()
	assert.Equal(t, in, out.String(), "every line passed on unchanged")
	assert.Equal(t, 3, p.done, "PASS and FAIL lines, split across writes")
	assert.Empty(t, errs.String(), "no terminal: nothing extra")
	assert.False(t, isTerminal(&errs))

	f, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f), "a file is no terminal")
}

func TestIsRowLine(t *testing.T) {
	assert.True(t, isRowLine([]byte("[rank 0] bench: bf16 1 MiB all_gather: median 10.6 us (p10 8.3, p90 13.0)")))
	assert.False(t, isRowLine([]byte("[rank 1] bench: bf16 1 MiB all_gather: median 10.6 us (p10 8.3, p90 13.0)")), "rank 0 counts")
	assert.True(t, isRowLine([]byte("bench: bf16 1 MiB all_gather: median 10.6 us (p10 8.3, p90 13.0)")), "in one process")
	assert.False(t, isRowLine([]byte("bench: 2 ranks on 1 GPUs")))
}
