package a2a_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// callEvery calls every exported method of v with zero arguments (but a
// live context, a positive duration and lists of one tensor) and returns, by method name,
// what each returned, failing t where one panics.
func callEvery(t *testing.T, v any) map[string][]reflect.Value {
	t.Helper()
	rv := reflect.ValueOf(v)
	got := map[string][]reflect.Value{}
	for i := range rv.NumMethod() {
		name, m := rv.Type().Method(i).Name, rv.Method(i)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			switch in := m.Type().In(j); in {
			case reflect.TypeFor[context.Context]():
				args[j] = reflect.ValueOf(context.Background())
			case reflect.TypeFor[time.Duration]():
				args[j] = reflect.ValueOf(time.Second)
			case reflect.TypeFor[[]a2a.Tensor]():
				args[j] = reflect.ValueOf(make([]a2a.Tensor, 1)) // packed: one tensor, so the count is right
			default:
				args[j] = reflect.Zero(in)
			}
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%T.%s panics: %v", v, name, r)
				}
			}()
			got[name] = m.Call(args)
		}()
	}
	return got
}

// checkUnmade checks what callEvery got from a value its constructor did
// not make: Close returns nil, every other method that returns an error
// returns one matching sentinel (and zero values beside it), and every
// method without an error returns zero values.
func checkUnmade(t *testing.T, v any, sentinel error, wantMethods int) {
	t.Helper()
	got := callEvery(t, v)
	assert.Len(t, got, wantMethods, "%T: every exported method was called", v)
	errType := reflect.TypeFor[error]()
	for name, out := range got {
		hasErr := len(out) > 0 && out[len(out)-1].Type() == errType
		for k, o := range out {
			if hasErr && k == len(out)-1 {
				break
			}
			if o.Type() == reflect.TypeFor[a2a.StreamOps]() {
				continue // On: a StreamOps of the same Comm, checked as its own value
			}
			assert.True(t, o.IsZero(), "%T.%s: result %d is %v, not the zero value", v, name, k, o)
		}
		if !hasErr {
			continue
		}
		err, _ := out[len(out)-1].Interface().(error)
		if name == "Close" {
			assert.NoError(t, err, "%T.Close: nothing to release", v)
			continue
		}
		if assert.Error(t, err, "%T.%s", v, name) {
			assert.ErrorIs(t, err, sentinel, "%T.%s", v, name)
			assert.Regexp(t, `^a2a: `, err.Error(), "%T.%s", v, name)
		}
	}
}

// Every exported method of the public types, on a nil value (what a
// failed New, Join, NewGroup, OpenDevice or CaptureGraph returns) and on
// the zero value, answers without panicking: Close returns nil, so that
// `defer comm.Close()` before checking Join's error is harmless; the
// methods of a Comm or Group that return an error return one matching
// ErrNotConnected, as the operations always have; a Device's and a
// Graph's, which hold a context, ErrClosed, as they do once closed.
func TestUnmadeValuesAnswer(t *testing.T) {
	for _, tc := range []struct {
		v        any
		sentinel error
		methods  int
	}{
		{(*a2a.Comm)(nil), a2a.ErrNotConnected, 30},
		{&a2a.Comm{}, a2a.ErrNotConnected, 30},
		{a2a.StreamOps{}, a2a.ErrNotConnected, 12},
		{(*a2a.Comm)(nil).On(0), a2a.ErrNotConnected, 12},
		{(*a2a.Group)(nil), a2a.ErrNotConnected, 4},
		{&a2a.Group{}, a2a.ErrNotConnected, 4},
		{(*a2a.Device)(nil), a2a.ErrClosed, 11},
		{&a2a.Device{}, a2a.ErrClosed, 11},
		{(*a2a.Graph)(nil), a2a.ErrClosed, 2},
		{&a2a.Graph{}, a2a.ErrClosed, 2},
	} {
		checkUnmade(t, tc.v, tc.sentinel, tc.methods)
	}
}

// The quick start's order: Join fails, and the deferred Close of the nil
// Comm it returned neither panics nor adds an error.
func TestCloseAfterFailedJoin(t *testing.T) {
	comm, err := a2a.Join(context.Background(), a2a.Config{WorldSize: 0}, nil)
	require.ErrorIs(t, err, a2a.ErrConfig)
	require.Nil(t, comm)
	require.NotPanics(t, func() { require.NoError(t, comm.Close()) })
	_, err = comm.SendRecvHeads(a2a.Tensor{})
	require.ErrorIs(t, err, a2a.ErrNotConnected)
	require.ErrorIs(t, comm.Sync(), a2a.ErrNotConnected)
}

// The functions that take a Comm, an Exchanger or a function refuse nil
// ones with an error, before touching any device.
func TestNilArguments(t *testing.T) {
	_, err := a2a.Join(context.Background(), a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16}, nil)
	assert.ErrorIs(t, err, a2a.ErrConfig, "Join without an Exchanger")
	assert.Contains(t, err.Error(), "Join needs an Exchanger")
	_, err = a2a.CaptureGraph(0, func() error { return nil }, nil)
	assert.ErrorIs(t, err, a2a.ErrNotConnected, "CaptureGraph of a nil Comm")
	_, err = a2a.CaptureGraph(0, func() error { return nil }, &a2a.Comm{})
	assert.ErrorIs(t, err, a2a.ErrNotConnected, "CaptureGraph of the zero Comm")
	_, err = a2a.CaptureGraph(0, nil, &a2a.Comm{})
	assert.ErrorIs(t, err, a2a.ErrConfig, "CaptureGraph without a record function")
	assert.False(t, errors.Is(err, a2a.ErrNotConnected), "the missing function is named first: %v", err)
}
