package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseSize reads a positive byte count with an optional binary suffix:
// "131072", "128K", "1M", "2G" (also "128KiB", "1MB", lower case).
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "IB")
	t = strings.TrimSuffix(t, "B")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		}
		if shift != 0 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("bad size %q: want a positive integer with an optional K, M or G suffix", s)
	}
	if v > math.MaxInt64>>shift {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return v << shift, nil
}

// parseSizes reads a comma-separated list of sizes.
func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range splitList(s) {
		v, err := parseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes in %q", s)
	}
	return out, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// formatBytes prints a byte count in binary units: "128 KiB", "1 MiB",
// "85.3 KiB", "1000 B".
func formatBytes(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if n == math.Trunc(n) {
		return fmt.Sprintf("%d %s", int64(n), units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
