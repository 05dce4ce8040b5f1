package fdshare

import (
	"encoding/binary"
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// shareError is err in context, matching api.ErrShare.
func shareError(what string, err error) error {
	return fmt.Errorf("a2a: %s: %v: %w", what, err, api.ErrShare)
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
