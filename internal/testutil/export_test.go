package testutil

// StubCopy is stubCopy, for the tests of its reaction to a failed build.
var StubCopy = stubCopy
