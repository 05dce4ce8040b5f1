package ipc

import (
	"fmt"
	"sync/atomic"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// Landing is where a staged fp8 wire operation decodes the rows its peers
// send: in the exchange launch, parcel by parcel as they land, with what
// had not landed left to the decode launch (kernelabi.WireLanding); or all
// of them in the decode launch after the exchange (kernelabi.WireStaged).
type Landing int32

const (
	// LandingAuto is the library's choice: after the exchange, on every
	// group, for now. Where ranks share a GPU, decoding as rows land is
	// slower, since the exchange and the decode share its memory's
	// bandwidth and the decode inside the exchange keeps fewer loads in
	// flight than the decode launch (one H200, two ranks, 128 MiB over
	// E4M3: SendRecvHeads 441 us against 322, AllGather 567 against 437);
	// where each rank has its GPU the decode could fill the time the link
	// takes, which a two-GPU run has to show before it becomes the choice.
	LandingAuto Landing = iota
	// LandingOn always decodes as rows land.
	LandingOn
	// LandingOff always decodes after the exchange.
	LandingOff
)

// String is the landing's name in flags: auto, on or off.
func (l Landing) String() string {
	switch l {
	case LandingOn:
		return "on"
	case LandingOff:
		return "off"
	}
	return "auto"
}

// ParseLanding reads a landing by its String.
func ParseLanding(s string) (Landing, error) {
	for _, l := range []Landing{LandingAuto, LandingOn, LandingOff} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("landing %q: want auto, on or off", s)
}

// LandingOverride, when not LandingAuto, replaces the choice for every
// Comm of the process: tests and the bench set it to take either way on
// any group.
var LandingOverride atomic.Int32

// wireMode is kernelabi's WIRE_* for plan p: staged operations decode as
// rows land only where LandingOverride says so (LandingAuto decodes after
// the exchange).
func wireMode(p plan.Plan) uint32 {
	switch {
	case p.WireDirect:
		return kernelabi.WireDirect
	case Landing(LandingOverride.Load()) == LandingOn:
		return kernelabi.WireLanding
	}
	return kernelabi.WireStaged
}
