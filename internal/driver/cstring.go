package driver

import "unsafe"

// maxCString bounds how far goString scans for the terminating NUL.
const maxCString = 1 << 16

// goString copies the NUL-terminated C string at p into a Go string; nil
// gives "".
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for n < maxCString && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns s as a NUL-terminated byte slice, or false if s itself
// contains a NUL.
func cString(s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, false
		}
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b, true
}

// trimNUL returns b up to its first NUL as a string.
func trimNUL(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
