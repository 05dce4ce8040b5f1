package nccl

import (
	"errors"
	"fmt"
)

// Result is an ncclResult_t.
type Result int32

// The results NCCL defines.
const (
	Success            Result = 0
	UnhandledCUDAError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8
)

// Error is a failed NCCL call: the call, its result, NCCL's text for the
// result and, where NCCL had one, its message about the last error.
type Error struct {
	Call   string
	Code   Result
	Text   string
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s (%d)", e.Call, e.Text, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// IsCode reports whether err is an *Error with result code.
func IsCode(err error, code Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
