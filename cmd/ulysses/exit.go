package main

import "strings"

// Exit statuses (see the package comment).
const (
	exitFailed = 1
	exitUsage  = 2
	exitNoGPU  = 3
)

// oneLine flattens an error into a single line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
