package fdshare

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// shareError is err in context, matching api.ErrShare.
func shareError(what string, err error) error {
	return fmt.Errorf("a2a: %s: %v: %w", what, err, api.ErrShare)
}
