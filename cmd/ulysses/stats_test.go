package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestMedianAndPercentiles(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{1, 2, 3}))
	assert.Equal(t, 2.5, median([]float64{1, 2, 3, 4}))
	assert.Equal(t, 7.0, median([]float64{7}))
	assert.Equal(t, 0.0, median(nil))

	s := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110}
	assert.Equal(t, 20.0, percentile(s, 10))
	assert.Equal(t, 100.0, percentile(s, 90))
	assert.Equal(t, 10.0, percentile(s, 0))
	assert.Equal(t, 110.0, percentile(s, 100))
	assert.InDelta(t, 13.0, percentile([]float64{10, 20, 30, 40}, 10), 1e-9) // pos 0.3
	assert.InDelta(t, 37.0, percentile([]float64{10, 20, 30, 40}, 90), 1e-9)
	assert.Equal(t, percentile([]float64{1, 2, 3, 4}, 50), median([]float64{1, 2, 3, 4}))
}

func TestSummarize(t *testing.T) {
	times := []time.Duration{4 * time.Microsecond, 1 * time.Microsecond, 3 * time.Microsecond, 2 * time.Microsecond}
	s := summarize(times)
	assert.Equal(t, 2.5, s.Median)
	assert.Equal(t, 2.5, s.Mean)
	assert.InDelta(t, 1.3, s.P10, 1e-9)
	assert.InDelta(t, 3.7, s.P90, 1e-9)
	assert.Equal(t, opStats{}, summarize(nil))
	assert.Equal(t, 1.5, summarize([]time.Duration{1500 * time.Nanosecond}).Median)
}

func TestMaxOver(t *testing.T) {
	m := maxOver([]opStats{{Median: 10, P10: 9, P90: 12, Mean: 10}, {Median: 11, P10: 8, P90: 15, Mean: 10.5}})
	assert.Equal(t, opStats{Median: 11, P10: 9, P90: 15, Mean: 10.5}, m)
}
