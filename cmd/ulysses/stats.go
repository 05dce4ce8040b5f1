package main

import (
	"slices"
	"time"
)

// opStats summarises the per-operation times of one rank, in microseconds.
type opStats struct {
	Median float64 `json:"median_us"`
	P10    float64 `json:"p10_us"`
	P90    float64 `json:"p90_us"`
	Mean   float64 `json:"mean_us"`
	// BackToBack is the mean time per operation of a run with no events
	// between operations (filled in by the caller, not by summarize).
	BackToBack float64 `json:"back_to_back_us"`
	// Stream and Graph are the mean time per operation back to back on a
	// stream of the bench's own (Comm.On), and replayed from a CUDA graph
	// of --graph-ops operations, 0 where none is timed (over NCCL) (filled
	// in by the caller).
	Stream float64 `json:"stream_us"`
	Graph  float64 `json:"graph_us"`
	// With --overlap: the back-to-back time per operation while the burn
	// kernel runs beside it, and how much longer than alone each took.
	OverlapExchange         float64 `json:"overlap_exchange_us,omitempty"`
	OverlapComputeSlowdown  float64 `json:"overlap_compute_slowdown,omitempty"`
	OverlapExchangeSlowdown float64 `json:"overlap_exchange_slowdown,omitempty"`
	// With --nccl-self: each phase's median (filled in by the caller).
	Phases *phaseTimes `json:"phases,omitempty"`
	// With --nccl-self at world one: NCCL's own time for the size's bytes.
	Ref *ncclReference `json:"nccl_reference,omitempty"`
}

// summarize returns the median, 10th and 90th percentiles and mean of
// times; zero for no times.
func summarize(times []time.Duration) opStats {
	if len(times) == 0 {
		return opStats{}
	}
	us := make([]float64, len(times))
	sum := 0.0
	for i, t := range times {
		us[i] = float64(t.Nanoseconds()) / 1e3
		sum += us[i]
	}
	slices.Sort(us)
	return opStats{
		Median: median(us),
		P10:    percentile(us, 10),
		P90:    percentile(us, 90),
		Mean:   sum / float64(len(us)),
	}
}

// median of sorted values: the middle one, or the mean of the two middle ones.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// percentile of sorted values, q in [0, 100], interpolated linearly between
// neighbours (as bench/nccl_bench.py computes it).
func percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	pos := float64(n-1) * q / 100
	lo := int(pos)
	hi := min(lo+1, n-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// maxOver combines the ranks' stats of one row: each statistic is the
// largest any rank saw (the group is as slow as its slowest rank).
func maxOver(ranks []opStats) opStats {
	var m opStats
	for i, s := range ranks {
		if i == 0 {
			m = s
			continue
		}
		m.Median = max(m.Median, s.Median)
		m.P10 = max(m.P10, s.P10)
		m.P90 = max(m.P90, s.P90)
		m.Mean = max(m.Mean, s.Mean)
		m.BackToBack = max(m.BackToBack, s.BackToBack)
		m.Stream = max(m.Stream, s.Stream)
		m.Graph = max(m.Graph, s.Graph)
		m.OverlapExchange = max(m.OverlapExchange, s.OverlapExchange)
		m.OverlapComputeSlowdown = max(m.OverlapComputeSlowdown, s.OverlapComputeSlowdown)
		m.OverlapExchangeSlowdown = max(m.OverlapExchangeSlowdown, s.OverlapExchangeSlowdown)
	}
	return m
}
