package dl

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenMissing(t *testing.T) {
	_, err := Open("/nonexistent/libnothing.so")
	require.Error(t, err)
	require.NotEmpty(t, err.Error(), "the loader's text, or a message of our own")
}

// TestBind: the first name that resolves is bound (and recorded), a
// missing optional symbol stays zero, and the first missing required one
// is named.
func TestBind(t *testing.T) {
	have := map[string]uintptr{"a_v2": 1, "b": 2, "d": 4}
	lookup := func(name string) (uintptr, error) {
		if p, ok := have[name]; ok {
			return p, nil
		}
		return 0, errors.New("undefined symbol: " + name)
	}
	var a, b, c, d uintptr
	var aName string
	table := []Symbol{Req(&a, "a_v2", "a").Named(&aName), Req(&b, "b"), Opt(&c, "c"), Req(&d, "d")}
	require.Empty(t, Bind(table, lookup))
	require.Equal(t, []uintptr{1, 2, 0, 4}, []uintptr{a, b, c, d})
	require.Equal(t, "a_v2", aName)
	var e uintptr
	require.Equal(t, "e_v2", Bind([]Symbol{Req(&b, "b"), Req(&e, "e_v2", "e")}, lookup))
}

// RegisterFunc turns purego's panic into an error that names the entry
// point and leaves the function nil.
func TestRegisterFuncRefused(t *testing.T) {
	var f func(x int32) int32
	err := RegisterFunc(&f, 0, "fooBar, whose struct is passed by value,")
	require.Error(t, err)
	require.Nil(t, f)
	want := "cannot bind fooBar, whose struct is passed by value, on " + runtime.GOOS + "/" + runtime.GOARCH + ": "
	require.True(t, strings.HasPrefix(err.Error(), want), "error %q does not start with %q", err, want)
}
