package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNCCLSelfFlag: --nccl-self needs the NCCL transport and a process
// per rank.
func TestNCCLSelfFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nccl-self"}, "it needs --transport nccl"},
		{[]string{"--nccl-self", "--transport", "ipc"}, "it needs --transport nccl"},
		{[]string{"--nccl-self", "--transport", "nccl", "--single-process"}, "drop --single-process"},
		{[]string{"--nccl-self", "--transport", "nccl"}, ""},
	} {
		fs, o := newBenchFlags(false)
		require.NoError(t, fs.Parse(c.args))
		_, err := o.plan()
		if c.want == "" {
			require.NoError(t, err, "%v", c.args)
			require.True(t, o.ncclSelf)
			continue
		}
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}

// TestPhaseTable: rows with phases print one line each, with the sum (the
// fp8 wire's encode and decode included); rows without print nothing.
func TestPhaseTable(t *testing.T) {
	var b bytes.Buffer
	writePhaseTable(&b, []benchRow{{Op: "all_gather", DType: "bf16", BytesPerRank: 1 << 20}})
	require.Empty(t, b.String())
	writePhaseTable(&b, []benchRow{{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 128 << 10,
		MedianUS: 30, Phases: &phaseTimes{Own: 0.5, Pack: 1.25, Group: 20, Unpack: 2}, NCCLReference: &ncclReference{SendSelfUS: 9.5}}})
	require.Contains(t, b.String(), "NCCL transport phases (--nccl-self)")
	require.Regexp(t, `send_recv_heads\s+bf16\s+exact\s+128 KiB\s+0\.0\s+0\.5\s+1\.2\s+20\.0\s+2\.0\s+0\.0\s+23\.8\s+30\.0\s+9\.5\s+0\.0\s+0\.0\s+0\.0\n`, b.String())
	b.Reset()
	writePhaseTable(&b, []benchRow{{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 128 << 10, MedianUS: 12, Phases: &phaseTimes{Group: 10},
		NCCLReference: &ncclReference{SendSelfUS: 14, AlltoAllUS: 7.5, WindowSendSelfUS: 11.25, Note: "ncclAlltoAll of the zero-CTA policy: refused"}}})
	require.Regexp(t, `128 KiB(\s+[0-9.]+){8}\s+14\.0\s+7\.5\s+11\.2\s+0\.0\n  \(ncclAlltoAll of the zero-CTA policy: refused\)\n`, b.String(), "the references, and what failed")
	b.Reset()
	writePhaseTable(&b, []benchRow{{Op: "all_gather", DType: "bf16", Wire: "e4m3", BytesPerRank: 8 << 20,
		MedianUS: 50, Phases: &phaseTimes{Encode: 7, Own: 0.5, Pack: 1, Group: 20, Unpack: 2, Decode: 9.5}}})
	require.Regexp(t, `all_gather\s+bf16\s+e4m3\s+8 MiB\s+7\.0\s+0\.5\s+1\.0\s+20\.0\s+2\.0\s+9\.5\s+40\.0\s+50\.0`, b.String(), "the wire's phases in the sum")
}

// TestNCCLLaunchFlag: --nccl-launch is auto (the default), async or
// blocking; a choice but auto needs the NCCL transport and a process per
// rank, and the plan carries it.
func TestNCCLLaunchFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nccl-launch", "fast"}, "want auto, async or blocking"},
		{[]string{"--nccl-launch", "blocking"}, "it needs --transport nccl"},
		{[]string{"--nccl-launch", "async", "--single-process", "--transport", "nccl"}, "drop --single-process"},
		{[]string{"--nccl-launch", "async", "--transport", "nccl"}, ""},
		{[]string{"--single-process"}, ""},
		{[]string{"--nccl-launch", "blocking", "--transport", "nccl", "--single-process"}, "drop --single-process"},
		{[]string{"--nccl-launch", "blocking", "--transport", "nccl", "--nccl-self"}, ""},
		{[]string{"--transport", "nccl"}, ""},
	} {
		fs, o := newBenchFlags(false)
		require.NoError(t, fs.Parse(c.args))
		p, err := o.plan()
		if c.want != "" {
			require.ErrorContains(t, err, c.want, "%v", c.args)
			continue
		}
		require.NoError(t, err, "%v", c.args)
		require.Equal(t, o.ncclLaunch, p.launch.String(), "%v", c.args)
	}
}

// TestNCCLLaunchHeader: the header line of rows over NCCL names the launch.
func TestNCCLLaunchHeader(t *testing.T) {
	_, o := newBenchFlags(false)
	rep := &benchReport{World: 1, NCCLLaunch: "blocking", Rows: []benchRow{{Op: "all_gather", DType: "bf16", BytesPerRank: 1 << 20, World: 1, Transport: "nccl", MedianUS: 10}}}
	var b bytes.Buffer
	writeBenchTable(&b, rep, o)
	require.Contains(t, b.String(), "over nccl, NCCL launch blocking,")
}
