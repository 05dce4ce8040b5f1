package a2a_test

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// firstGroup holds what the process's first group cost, once
// BenchmarkGroupLifecycle has made it: run one sub-benchmark per process
// (-test.run '^$' -test.bench NAME) for these to be a cold start.
var firstGroup struct {
	made             bool
	newGroup, opTime time.Duration
}

// BenchmarkGroupLifecycle measures groups of two ranks on GPU 0 (bf16,
// 4096 tokens of 32 heads of 128 per rank), over the exact wire and E4M3:
// each iteration makes a group (NewGroup), runs one SendRecvHeads on both
// ranks and waits for it (the first operation of its kind loads its
// kernels where the driver compiles PTX), and closes the group. It
// reports the means of the three (newgroup-ms, op-ms, close-ms), the
// first group of the process apart (first-newgroup-ms, first-op-ms), and
// the process's resident memory after the last group (rss-MiB). Under
// "dropped" nothing else holds the device's primary context, so each
// Close destroys it and the next NewGroup makes it again; under "held" a
// Device keeps it. Nothing here is asserted but that every step succeeds:
// it is a measurement (docs/BENCHMARKS.md, "cold start").
func BenchmarkGroupLifecycle(b *testing.B) {
	info := requireGPU(b)
	for _, w := range []a2a.Wire{a2a.WireExact, a2a.WireE4M3} {
		for _, ctx := range []string{"dropped", "held"} {
			b.Run(w.String()+"/"+ctx, func(b *testing.B) {
				if why := noWire(info); w.Lossy() && why != "" {
					b.Skipf("the fp8 wire needs compute capability 9.0: %s", why)
				}
				if ctx == "held" {
					d, err := a2a.OpenDevice(0)
					require.NoError(b, err)
					b.Cleanup(func() { require.NoError(b, d.Close()) })
				}
				benchLifecycle(b, w)
			})
		}
	}
}

func benchLifecycle(b *testing.B, w a2a.Wire) {
	const tokens = 4096
	cfg := a2a.Config{MaxTokens: 2 * tokens, HiddenDim: 32 * 128, DType: a2a.BFloat16, Wire: w}
	var newGroup, op, closing time.Duration
	for i := range b.N {
		start := time.Now()
		g, err := a2a.NewGroup(cfg, []int{0, 0})
		require.NoError(b, err)
		made := time.Now()
		xs := make([]a2a.Tensor, g.Size())
		for r := range xs {
			c := g.Comm(r)
			require.NoError(b, c.SetRankTokens([]int{tokens, tokens}))
			xs[r], err = c.Device().Alloc([4]int{1, tokens, 32, 128}, a2a.BFloat16)
			require.NoError(b, err)
		}
		opStart := time.Now()
		for r, x := range xs {
			_, err := g.Comm(r).SendRecvHeads(x)
			require.NoError(b, err)
		}
		require.NoError(b, g.Sync())
		opEnd := time.Now()
		if i == 0 {
			logKernels(b)
		}
		for r, x := range xs {
			require.NoError(b, g.Comm(r).Device().Free(x))
		}
		closeStart := time.Now()
		require.NoError(b, g.Close())
		newGroup += made.Sub(start)
		op += opEnd.Sub(opStart)
		closing += time.Since(closeStart)
		if !firstGroup.made {
			firstGroup.made, firstGroup.newGroup, firstGroup.opTime = true, made.Sub(start), opEnd.Sub(opStart)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(newGroup), "newgroup-ms")
	b.ReportMetric(ms(op), "op-ms")
	b.ReportMetric(ms(closing), "close-ms")
	b.ReportMetric(float64(firstGroup.newGroup)/1e6, "first-newgroup-ms")
	b.ReportMetric(float64(firstGroup.opTime)/1e6, "first-op-ms")
	if rss, ok := residentMiB(); ok {
		b.ReportMetric(rss, "rss-MiB")
	}
}

// logKernels logs what GPU 0's kernels are, while a group is live there.
func logKernels(b *testing.B) {
	sys, err := a2a.System()
	require.NoError(b, err)
	d := sys.Devices[0]
	b.Logf("GPU 0 (%s, %d.%d): machine code %q, PTX reason %q", d.Name, d.Major, d.Minor, d.MachineCode, d.PTXReason)
}

// residentMiB reads the process's resident memory (VmRSS) from
// /proc/self/status; false where there is none.
func residentMiB() (float64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := bytes.Fields(s.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmRSS:" {
			kb, err := strconv.ParseFloat(string(f[1]), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}
