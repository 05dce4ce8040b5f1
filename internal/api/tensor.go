package api

import "math"

// MaxDim bounds every dimension of a tensor, so that products of a few of
// them cannot overflow int64.
const MaxDim = math.MaxInt32
