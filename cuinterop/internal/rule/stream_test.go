package rule

import (
	"errors"
	"strings"
	"testing"
)

func TestStreamAccepts(t *testing.T) {
	for name, s := range map[string]Stream{
		"primary context's stream":        {Handle: 0x51, Ctx: 0xc0, Device: 0, Primary: 0xc0},
		"NoStream, primary context":       {Ctx: 0xc0, Device: 0, Primary: 0xc0},
		"NoStream, no context current":    {},
		"another device's primary stream": {Handle: 0x52, Ctx: 0xc1, Device: 1, Primary: 0xc1},
	} {
		if err := s.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStreamRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		s    Stream
		says []string
	}{
		"another context's stream": {Stream{Handle: 0x51, Ctx: 0xf0, Device: 2, Primary: 0xc2},
			[]string{"stream 0x51 is of context 0xf0 on device 2", "primary context 0xc2", "cu.Device(2).RetainPrimaryCtx()"}},
		"primary context unused": {Stream{Handle: 0x51, Ctx: 0xf0, Device: 0},
			[]string{"not active in this process", "cu.Device(0).RetainPrimaryCtx()"}},
		"NoStream in another context": {Stream{Ctx: 0xf0, Device: 0, Primary: 0xc0},
			[]string{"cu.NoStream, with the calling thread's current context, is of context 0xf0"}},
	} {
		err := c.s.Check()
		if !errors.Is(err, ErrNotPrimaryContext) {
			t.Errorf("%s: %v, want an error matching ErrNotPrimaryContext", name, err)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", name, err, s)
			}
		}
	}
}
