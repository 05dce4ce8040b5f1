package testutil

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Staller is how a crowding connection behaves: it never proves a key.
type Staller int

const (
	HeldSilent   Staller = iota // connects once, says nothing, holds it
	RedialSilent                // connects, says nothing, and dials again once closed
	RedialHello                 // sends a hello, then nothing, and dials again once closed
)

// String says what the staller does, for test names.
func (s Staller) String() string {
	return [...]string{"held silent", "redialling silent", "redialling with a hello"}[s]
}

// Crowd runs n connections of kind k against the Unix-domain socket at
// path until ctx ends (a RedialHello sends hello first), and returns a
// function that waits for them to stop and says how many connections
// they made. Every connection is closed once ctx ends.
func Crowd(ctx context.Context, path string, n int, k Staller, hello []byte) func() int {
	var wg sync.WaitGroup
	var dials atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := net.Dial("unix", path)
				if err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(time.Millisecond):
					}
					continue
				}
				dials.Add(1)
				stop := context.AfterFunc(ctx, func() { c.Close() })
				if k == RedialHello {
					_, _ = c.Write(hello)
				}
				_, _ = io.Copy(io.Discard, c) // until the server or ctx closes it
				stop()
				c.Close()
				if k == HeldSilent {
					<-ctx.Done()
				}
			}
		}()
	}
	return func() int { wg.Wait(); return int(dials.Load()) }
}

// Slowdown is how much longer than its bound a timed test may take here:
// 1, or 5 under the race detector.
func Slowdown() time.Duration {
	if Race {
		return 5
	}
	return 1
}
