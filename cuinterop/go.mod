module github.com/ulysses-go/ulysses/cuinterop

go 1.25.0

require (
	github.com/ulysses-go/ulysses v0.0.0
	gorgonia.org/cu v0.9.6
)

require (
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)

replace github.com/ulysses-go/ulysses => ../
