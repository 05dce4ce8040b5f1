package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress counts the lines of the ranks' output that end a step (a
// case's PASS or FAIL line, say) and, where stderr is a terminal, keeps
// one line there up to date: what runs, n of m, the time so far. It writes
// nothing extra where stderr is not a terminal (a log, a pipe, CI), and
// passes every line on to out unchanged.
type progress struct {
	out, term io.Writer // term is nil where stderr is no terminal
	what      string
	isStep    func(line []byte) bool
	total     int
	start     time.Time

	mu      sync.Mutex
	partial []byte // the part of a line not yet ended
	done    int
}

// newProgress reports on stderr, when it is a terminal, total steps of
// what, each ending with a line isStep accepts in what is written to out.
func newProgress(out, stderr io.Writer, what string, total int, isStep func([]byte) bool) *progress {
	p := &progress{out: out, what: what, isStep: isStep, total: total, start: time.Now()}
	if isTerminal(stderr) {
		p.term = stderr
	}
	return p
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		if p.isStep(p.partial[:i]) {
			p.done++
		}
		p.partial = p.partial[i+1:]
	}
	if p.term != nil {
		fmt.Fprintf(p.term, "\r\033[K")
	}
	n, err := p.out.Write(b)
	p.show()
	return n, err
}

// show redraws the progress line.
func (p *progress) show() {
	if p.term != nil {
		fmt.Fprintf(p.term, "%s: %d of %d, %s", p.what, p.done, p.total, time.Since(p.start).Round(time.Second))
	}
}

// finish clears the progress line.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term != nil {
		fmt.Fprintf(p.term, "\r\033[K")
	}
}
