package exchange

import (
	"math/rand/v2"
	"time"
)

// maxBackoff is how many times DialInterval a turned-away peer waits at
// most before it dials again.
const maxBackoff = 8

// backoff paces a peer that rank 0 turns away: the first pause is about
// DialInterval, each further one twice the last up to maxBackoff times
// DialInterval, and each is drawn uniformly from the upper half of its
// span, so that peers turned away together do not return together.
type backoff struct {
	base, span time.Duration
}

// newBackoff starts a backoff from base.
func newBackoff(base time.Duration) *backoff { return &backoff{base: base, span: base} }

// next returns the next pause and lengthens the one after it.
func (b *backoff) next() time.Duration {
	d := b.span/2 + rand.N(b.span/2+1)
	b.span = min(2*b.span, maxBackoff*b.base)
	return d
}
