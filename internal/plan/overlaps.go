package plan

// Overlaps reports whether [ptr, ptr+n) meets [lo, lo+size).
func Overlaps(ptr uintptr, n int64, lo uintptr, size int64) bool {
	if n <= 0 || size <= 0 {
		return false
	}
	return uint64(ptr) < uint64(lo)+uint64(size) && uint64(ptr)+uint64(n) > uint64(lo)
}
