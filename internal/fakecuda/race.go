package fakecuda

import "runtime/debug"

// RaceEnabled reports whether the running binary was built with -race, under
// which allocation counts mean nothing (sync.Pool drops items at random).
func RaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
