# Targets: test (the tests, in this machine's world), test-worlds (the tests
# without a driver and with a driver but no device, whatever this machine
# has installed: what CI runs), check (gofmt + vet + test), ptx (regenerate
# the kernels; needs nvcc and its ptxas), ptx-check, ptx-show (the embedded
# PTX as plain text, for review), gpu-bin (test binaries and tools for a GPU
# machine without Go), race, fuzz.
GO      ?= go
GPU_BIN ?= .gpu-bin
PTX_SHOW ?= .ptx-show
# Without symbol tables and DWARF (-s -w) the binaries are smaller to copy
# to the GPU machine; Go's stack traces do not need them.
GPU_LDFLAGS ?= -ldflags=-s\ -w
CUDA_STUBS ?= /usr/lib/x86_64-linux-gnu/stubs
PKGS    := ./...
export CGO_ENABLED ?= 0

.PHONY: test test-worlds check fmt vet ptx ptx-check ptx-show gpu-bin race fuzz clean

test:
	$(GO) test $(PKGS)

# A driver library that is not there: a machine without the NVIDIA driver.
NO_DRIVER := ULYSSES_LIBCUDA=/nonexistent/libcuda.so.1

# The tests in the two worlds a machine without a GPU can be: no driver,
# then a driver without a device (internal/fakecuda's stub, whose cuInit
# says CUDA_ERROR_NO_DEVICE; building it needs cc). Each test that needs
# another world (the stub with devices) still sets it up itself.
test-worlds:
	@echo "-- world: no driver ($(NO_DRIVER))"
	$(NO_DRIVER) $(GO) test -count=1 $(PKGS)
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	lib=$$($(GO) run ./internal/fakecuda/cmd/fakecuda -no-device "$$dir") && \
	echo "-- world: a driver without a device (ULYSSES_LIBCUDA=$$lib)" && \
	ULYSSES_LIBCUDA="$$lib" $(GO) test -count=1 $(PKGS)

race:
	$(NO_DRIVER) CGO_ENABLED=1 $(GO) test -race $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

check: fmt vet test

# Regenerate the kernels from gen/kernels (needs nvcc and its ptxas: see
# docs/DEVELOPING.md): the shared ABI, then ptx/'s compressed PTX and
# cubins and its manifest.
ptx:
	$(GO) generate ./internal/kernelabi ./ptx

# Fails when regenerating would change what ptx/ commits (the compressed
# PTX and cubins, the manifest), or add a file there.
ptx-check: ptx
	git diff --exit-code -- ptx/
	@new=$$(git status --porcelain --untracked-files=all -- ptx/); if [ -n "$$new" ]; then echo "ptx/ has files regenerating added:"; echo "$$new"; exit 1; fi

# The embedded PTX as plain text, for review: $(PTX_SHOW)/*.ptx, from the
# committed ptx/*.ptx.gz.
ptx-show:
	mkdir -p $(PTX_SHOW)
	for f in ptx/*.ptx.gz; do gzip -dc "$$f" >$(PTX_SHOW)/$$(basename "$$f" .gz) || exit 1; done

# Test binaries and the command, built here (CGO_ENABLED=0) for the GPU
# machine; ship $(GPU_BIN) along and run them there. The gorgonia.org/cu
# adapter's (cuinterop/, a module of its own) needs cgo and cuda.h, and
# links NVIDIA's stub libcuda.so from CUDA_STUBS: the binary loads the
# driver's libcuda.so.1 there.
gpu-bin:
	mkdir -p $(GPU_BIN)
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/driver.test ./internal/driver
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/ptx.test ./ptx
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/a2a.test ./a2a
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/nccl.test ./internal/nccl
	$(GO) build $(GPU_LDFLAGS) -o $(GPU_BIN)/ulysses ./cmd/ulysses
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/join.test ./examples/join
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/group.test ./examples/group
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/graph.test ./examples/graph
	$(GO) test -c $(GPU_LDFLAGS) -o $(GPU_BIN)/attention.test ./examples/attention
	$(GO) build $(GPU_LDFLAGS) -o $(GPU_BIN)/join ./examples/join
	$(GO) build $(GPU_LDFLAGS) -o $(GPU_BIN)/attention ./examples/attention
	cp bench/nccl_bench.py $(GPU_BIN)/
	cd cuinterop && CGO_ENABLED=1 CGO_LDFLAGS="-L$(CUDA_STUBS)" $(GO) test -c $(GPU_LDFLAGS) -o $(abspath $(GPU_BIN))/cuinterop.test .

# Every fuzz target, 30 s each.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeHandle -fuzztime 30s ./internal/handle
	$(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 30s ./a2a/exchange
	$(GO) test -run '^$$' -fuzz FuzzDecodeBlobs -fuzztime 30s ./a2a/exchange
	$(GO) test -run '^$$' -fuzz FuzzRootRound -fuzztime 30s ./a2a/exchange

clean:
	rm -rf $(GPU_BIN) $(PTX_SHOW)
