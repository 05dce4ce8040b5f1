// fakecuda: a stub CUDA driver (libcuda.so.1) for tests without a GPU.
//
// It exports every entry point internal/driver requires, with the real
// signatures, and behaves like a driver whose devices share the host's
// memory: allocations are malloc'd host memory, so memsets and copies
// really happen, while kernel launches are checked and counted but run
// nothing. Arguments are checked about as strictly as the real driver
// checks them (a current context, live handles, memory ranges inside one
// allocation), so misuse shows up as an error code rather than as silence.
//
// Environment, read at every call:
//   FAKECUDA_DEVICES=N            number of devices (default 2, at most 16)
//   FAKECUDA_NO_PEER=i-j,k>l      device pairs that cannot access each other:
//                                 i-j both ways, k>l only k to l; every
//                                 other pair can
//   FAKECUDA_FAIL_LAUNCH_AFTER=N  launches after the first N fail with
//                                 CUDA_ERROR_LAUNCH_FAILED (719)
//   FAKECUDA_SYNC_ERROR=code      cuStreamSynchronize returns code on a
//                                 stream that has had a kernel launched on
//                                 it (a failure seen after a launch)
//   FAKECUDA_INIT_ERROR=code      cuInit returns code
//   FAKECUDA_DEVICE_BASE=N        device handles (CUdevice) are ordinal + N
//                                 rather than the ordinal itself
//   FAKECUDA_MISSING_FUNCTIONS=a,b  cuModuleGetFunction does not find these
//                                 names (CUDA_ERROR_NOT_FOUND)
//   FAKECUDA_CC=9.0,8.6           compute capability of devices 0, 1, ...
//                                 (the last one given for the rest;
//                                 default 9.0)
//   FAKECUDA_CUBIN_ERROR=code     loading a cubin fails with code (e.g. 209,
//                                 CUDA_ERROR_NO_BINARY_FOR_GPU)
//   FAKECUDA_RECORD_PARAMS=N      cuLaunchKernel records its first N (at
//                                 most 4) kernel parameters, 8 bytes each
//   FAKECUDA_KERNELS_DONE=1       launches are done at once, as copies are:
//                                 nothing is queued, so cuStreamQuery finds
//                                 the stream idle (for code that polls)
//   FAKECUDA_HANG=A,W,C,V         kernels wait for their host, as a2a's do
//                                 for a peer that never comes: a launch
//                                 reads the address p at byte A of its first
//                                 parameter, and cuStreamSynchronize on its
//                                 stream then waits until the 32-bit word at
//                                 p+W is nonzero, stores V at p+C (32 bits)
//                                 and settles the stream
//
// Graphs: a launch on a stream being captured is recorded, not queued; the
// executable graph queues every recorded launch on the stream it is
// launched on.
//
// Work model: a launch is work queued on its stream until the host waits
// for it: cuStreamSynchronize on the stream, cuEventSynchronize on an event
// recorded after it, or any call that waits for the whole device (below).
// cuStreamQuery answers CUDA_ERROR_NOT_READY while a stream has such work.
// Copies and memsets happen at once and queue nothing.
//
// Device-wide waits: cuCtxSynchronize, cuMemFree_v2, cuMemFreeHost,
// cuModuleLoadDataEx, cuModuleUnload and cuIpcCloseMemHandle wait for all
// work of the context in the real driver (and hold a lock that stalls the
// process's launches meanwhile). The stub counts them, counts apart those
// made while a stream of the context (live or destroyed) had work queued,
// and then treats all of the context's work as done.
//
// fakecuda_counter(i) reads the counters listed at its definition;
// fakecuda_last(i) the arguments of the latest call of a few entry points.
//
// Built by internal/fakecuda.Build with cc -shared -fPIC -O1; plain C99 plus
// the __atomic builtins of gcc and clang, no libraries beyond libc.

#define _GNU_SOURCE // memfd_create
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { unsigned char bytes[16]; } CUuuid;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_IMAGE = 200,
	INVALID_CONTEXT = 201,
	NO_BINARY_FOR_GPU = 209,
	PEER_ACCESS_UNSUPPORTED = 217,
	INVALID_PTX = 218,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	NOT_READY = 600,
	ILLEGAL_ADDRESS = 700,
	LAUNCH_OUT_OF_RESOURCES = 701,
	PEER_ACCESS_ALREADY_ENABLED = 704,
	PEER_ACCESS_NOT_ENABLED = 705,
	CONTEXT_IS_DESTROYED = 709,
	LAUNCH_FAILED = 719,
	STREAM_CAPTURE_UNSUPPORTED = 900,
	ILLEGAL_STATE = 401,
	NOT_SUPPORTED = 801,
	UNKNOWN = 999,
	STILL_MAPPED = -1, // internal: freed by its owner, kept for open IPC mappings
};

#define MAX_DEVICES 16
#define MAX_ALLOCS 4096
#define MAX_FUNCTIONS 128 // per module: the wire's cubin holds 84 entries
#define TOTAL_MEM ((size_t)141 << 30)
#define POISON 0xA5
#define IPC_LAZY_ENABLE_PEER_ACCESS 1u // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
#define EVENT_DISABLE_TIMING 2u        // CU_EVENT_DISABLE_TIMING

// ---- locking and environment ----------------------------------------------

static int lock_word;

static void lock(void) {
	while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		;
}

static void unlock(void) { __atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE); }

// env_long reads a decimal environment variable; def when unset, empty or
// not a number.
static long env_long(const char *name, long def) {
	const char *s = getenv(name);
	char *end;
	long v;
	if (s == NULL || *s == 0)
		return def;
	v = strtol(s, &end, 10);
	return *end == 0 ? v : def;
}

static int num_devices(void) {
	long n = env_long("FAKECUDA_DEVICES", 2);
	if (n < 0)
		n = 0;
	if (n > MAX_DEVICES)
		n = MAX_DEVICES;
	return (int)n;
}

// compute_capability is device ord's from FAKECUDA_CC ("9.0,8.6": one
// "major.minor" per device, the last one for the devices after it), as
// major*10+minor; 90 when unset or unreadable.
static int compute_capability(int ord) {
	const char *s = getenv("FAKECUDA_CC");
	int cc = 90;
	for (int i = 0; s != NULL && *s != 0; i++) {
		int major, minor, n = 0;
		if (sscanf(s, "%d.%d%n", &major, &minor, &n) != 2 || major < 1 || minor < 0 || minor > 9)
			break;
		cc = major * 10 + minor;
		if (i == ord)
			break;
		s += n;
		if (*s != ',')
			break;
		s++;
	}
	return cc;
}

// next_item moves *s past separators to the next item of a comma-separated
// list and reports whether there is one.
static int next_item(const char **s) {
	while (**s == ',' || **s == ' ')
		(*s)++;
	return **s != 0;
}

// no_peer reports whether FAKECUDA_NO_PEER says device a cannot access
// device b: it lists a-b, b-a or a>b.
static int no_peer(int a, int b) {
	const char *s = getenv("FAKECUDA_NO_PEER");
	char *end, sep;
	long i, j;
	while (s != NULL && next_item(&s)) {
		i = strtol(s, &end, 10);
		sep = *end;
		if (end == s || (sep != '-' && sep != '>'))
			return 0;
		s = end + 1;
		j = strtol(s, &end, 10);
		if (end == s)
			return 0;
		s = end;
		if ((i == a && j == b) || (sep == '-' && i == b && j == a))
			return 1;
	}
	return 0;
}

// listed reports whether the comma-separated list in environment variable
// env holds name.
static int listed(const char *env, const char *name) {
	const char *s = getenv(env);
	size_t n = strlen(name);
	while (s != NULL && next_item(&s)) {
		if (strncmp(s, name, n) == 0 && (s[n] == 0 || s[n] == ',' || s[n] == ' '))
			return 1;
		while (*s != 0 && *s != ',')
			s++;
	}
	return 0;
}

// ---- state -----------------------------------------------------------------

#define MAGIC_CTX 0xC0C0C0C0u
#define MAGIC_STREAM 0x57EA0001u
#define MAGIC_EVENT 0xE7E70001u
#define MAGIC_MODULE 0x30D00001u
#define MAGIC_FUNCTION 0xF0F00001u
#define MAGIC_GRAPH 0x6A6A0001u
#define MAGIC_GRAPH_EXEC 0x6A6A0002u

// Objects are never freed, only marked dead, so a stale handle is detected
// rather than read after free.
struct stream {
	unsigned magic;
	int dead;
	struct ctx *ctx;
	int launched;           // a kernel was ever launched on it
	long long queued, done; // launches on it, and how many the host waited for
	uintptr_t hang;         // FAKECUDA_HANG's p of the latest launch, or 0
	int capturing;          // between cuStreamBeginCapture and cuStreamEndCapture
	long long captured;     // launches captured since the capture began
	struct stream *next;    // every stream made, for the device-wide checks
};

struct ctx {
	unsigned magic;
	int ordinal;
	int refs;                  // primary context retains
	char peer[MAX_DEVICES];    // peer access enabled towards device i
	struct stream deflt;       // the default streams' work (handles 0, 1, 2)
};

struct event {
	unsigned magic;
	int dead;
	struct ctx *ctx;
	unsigned flags;
	int recorded;
	struct stream *stream; // where it was last recorded
	long long seq;         // that stream's launches then
};

struct module;

// A captured graph, or its executable form: the kernel launches it holds.
struct graph {
	unsigned magic;
	int dead;
	struct ctx *ctx;
	long long launches;
};

struct function {
	unsigned magic;
	struct module *mod;
	char name[128];
};

struct module {
	unsigned magic;
	int dead;
	struct ctx *ctx;
	int cubin;       // an ELF image, not PTX
	char *image;     // a copy of the image, for the names it defines
	size_t image_len;
	int nfunctions;
	struct function functions[MAX_FUNCTIONS];
};

struct alloc {
	char *p;
	size_t n;
	int host;     // cuMemHostAlloc rather than cuMemAlloc
	int ipc_open; // cuIpcOpenMemHandle mappings not yet closed
	int freed;    // freed by its owner while mapped: kept until the last mapping closes
	int vmm;      // a cuMemMap mapping: cuMemUnmap removes it, cuMemFree_v2 does not
};

static int initialized;
static struct ctx ctxs[MAX_DEVICES];
static __thread struct ctx *current;
static struct alloc allocs[MAX_ALLOCS];

static long long n_launches, n_launch_failures, n_launch_attempts;
static long long n_dev_allocs, n_host_allocs, n_dev_bytes;
static long long n_streams, n_events, n_modules, n_ipc_open;
static long long n_device_waits, n_busy_device_waits;
static long long n_ptx_loads, n_cubin_loads;
static struct stream *all_streams; // every stream made, newest first

// ---- helpers ---------------------------------------------------------------

static int check_ordinal(long ordinal) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= num_devices())
		return INVALID_DEVICE;
	return SUCCESS;
}

// device_base is FAKECUDA_DEVICE_BASE: cuDeviceGet hands out ordinal + base
// as the device handle, and the calls that take a handle want one of
// those. The real driver's handles are the ordinals; another base shows a
// caller passing an ordinal where a handle belongs.
static long device_base(void) { return env_long("FAKECUDA_DEVICE_BASE", 0); }

// device_of checks device handle dev and sets *ord to its ordinal.
static int device_of(CUdevice dev, int *ord) {
	long o = (long)dev - device_base();
	int r = check_ordinal(o);
	*ord = r == SUCCESS ? (int)o : -1;
	return r;
}

static int valid_ctx(struct ctx *c) {
	return c >= ctxs && c < ctxs + MAX_DEVICES && ((uintptr_t)c - (uintptr_t)ctxs) % sizeof *c == 0 &&
	       c->magic == MAGIC_CTX;
}

// need_ctx is what every call that works in "the current context" checks.
static int need_ctx(void) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (current == NULL)
		return INVALID_CONTEXT;
	if (current->refs <= 0)
		return CONTEXT_IS_DESTROYED;
	return SUCCESS;
}

static int check_stream(uintptr_t s) {
	struct stream *st = (struct stream *)s;
	if (s <= 2) // 0: the legacy default stream, 1: CU_STREAM_LEGACY, 2: CU_STREAM_PER_THREAD
		return SUCCESS;
	if (st->magic != MAGIC_STREAM || st->dead || st->ctx != current)
		return INVALID_HANDLE;
	return SUCCESS;
}

// need_stream is need_ctx, then check_stream(s).
static int need_stream(uintptr_t s) {
	int r = need_ctx();
	return r == SUCCESS ? check_stream(s) : r;
}

// stream_of returns the state of a stream handle check_stream accepted:
// the default streams share their context's.
static struct stream *stream_of(uintptr_t s) {
	return s <= 2 ? &current->deflt : (struct stream *)s;
}

static int pending(struct stream *st) { return st->done < st->queued; }

// device_wait models a call that waits for all of the current context's
// work: it counts the call, apart if work was queued, and settles the
// work. Call with a current context, without the lock.
static void device_wait(void) {
	struct ctx *c = current;
	int busy;
	lock();
	busy = pending(&c->deflt);
	c->deflt.done = c->deflt.queued;
	for (struct stream *st = all_streams; st != NULL; st = st->next) {
		if (st->ctx == c) {
			busy |= pending(st);
			st->done = st->queued;
		}
	}
	n_device_waits++;
	if (busy)
		n_busy_device_waits++;
	unlock();
}

static struct event *event_of(uintptr_t e) {
	struct event *ev = (struct event *)e;
	if (ev == NULL || ev->magic != MAGIC_EVENT || ev->dead)
		return NULL;
	return ev;
}

// find_alloc returns the live allocation containing [p, p+n), or NULL. Call
// with the lock held.
static struct alloc *find_alloc(uintptr_t p, size_t n) {
	for (int i = 0; i < MAX_ALLOCS; i++) {
		struct alloc *a = &allocs[i];
		uintptr_t lo = (uintptr_t)a->p;
		if (a->p != NULL && !a->freed && p >= lo && p - lo <= a->n && n <= a->n - (p - lo))
			return a;
	}
	return NULL;
}

// find_mapped returns the allocation at p that has IPC mappings open, freed
// by its owner or not (as in the real driver, an importer's mapping keeps
// the memory alive). Call with the lock held.
static struct alloc *find_mapped(uintptr_t p) {
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if ((uintptr_t)allocs[i].p == p && allocs[i].p != NULL && !allocs[i].host && allocs[i].ipc_open > 0)
			return &allocs[i];
	}
	return NULL;
}

// covered reports whether [p, p+n) lies in one live allocation (n == 0 is
// always fine).
static int covered(uintptr_t p, size_t n) {
	int ok;
	if (n == 0)
		return 1;
	lock();
	ok = find_alloc(p, n) != NULL;
	unlock();
	return ok;
}

// add_alloc_locked records an allocation of n bytes at p: host memory,
// device memory, or a VMM mapping (vmm, device memory too). The lock is
// held.
static int add_alloc_locked(char *p, size_t n, int host, int vmm) {
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].p == NULL) {
			allocs[i] = (struct alloc){.p = p, .n = n, .host = host, .vmm = vmm};
			if (host) {
				n_host_allocs++;
			} else {
				n_dev_allocs++;
				n_dev_bytes += (long long)n;
			}
			return SUCCESS;
		}
	}
	return OUT_OF_MEMORY;
}

static int add_alloc(char *p, size_t n, int host) {
	lock();
	int r = add_alloc_locked(p, n, host, 0);
	unlock();
	return r;
}

// remove_alloc_locked forgets the allocation starting at p of the given
// kind (a VMM mapping where vmm). The lock is held.
static int remove_alloc_locked(char *p, int host, int vmm) {
	int r = INVALID_VALUE;
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].p == p && allocs[i].host == host && !allocs[i].freed && allocs[i].vmm == vmm) {
			if (host) {
				n_host_allocs--;
			} else {
				n_dev_allocs--;
				n_dev_bytes -= (long long)allocs[i].n;
			}
			if (!host && allocs[i].ipc_open > 0) {
				allocs[i].freed = 1; // the last mapping's close frees it
				r = STILL_MAPPED;
			} else {
				allocs[i] = (struct alloc){0};
				r = SUCCESS;
			}
			break;
		}
	}
	return r;
}

// remove_alloc forgets the host or device allocation starting at p.
static int remove_alloc(char *p, int host) {
	lock();
	int r = remove_alloc_locked(p, host, 0);
	unlock();
	return r;
}

// ---- the latest calls, for tests of argument passing ----------------------

enum { MAX_RECORDED_PARAMS = 4 };

// What fakecuda_last reports: the flags of the latest cuMemHostAlloc,
// cuStreamCreate and cuEventCreate, and the arguments of the latest
// cuLaunchKernel, each recorded as the call starts, whether or not it then
// succeeds.
enum {
	LAST_HOST_ALLOC_FLAGS,
	LAST_STREAM_FLAGS,
	LAST_EVENT_FLAGS,
	LAST_LAUNCH_FUNCTION,
	LAST_LAUNCH_DIMS, // grid x, y, z, then block x, y, z
	LAST_LAUNCH_SHARED = LAST_LAUNCH_DIMS + 6,
	LAST_LAUNCH_STREAM,
	LAST_LAUNCH_PARAMS, // the kernelParams pointer
	LAST_LAUNCH_EXTRA,  // the extra pointer
	LAST_LAUNCH_ARGS,   // the first FAKECUDA_RECORD_PARAMS parameters
	LAST_COUNT = LAST_LAUNCH_ARGS + MAX_RECORDED_PARAMS,
};

static long long last[LAST_COUNT];

static void record(int i, long long v) {
	lock();
	last[i] = v;
	unlock();
}

// record_launch records a cuLaunchKernel call; the parameters it reads
// (8 bytes each) must exist, so it reads none unless FAKECUDA_RECORD_PARAMS
// says how many.
static void record_launch(uintptr_t f, const unsigned dims[6], unsigned shared, uintptr_t stream, void **params,
			  void **extra) {
	long n = params == NULL ? 0 : env_long("FAKECUDA_RECORD_PARAMS", 0);
	lock();
	last[LAST_LAUNCH_FUNCTION] = (long long)f;
	for (int i = 0; i < 6; i++)
		last[LAST_LAUNCH_DIMS + i] = dims[i];
	last[LAST_LAUNCH_SHARED] = shared;
	last[LAST_LAUNCH_STREAM] = (long long)stream;
	last[LAST_LAUNCH_PARAMS] = (long long)(uintptr_t)params;
	last[LAST_LAUNCH_EXTRA] = (long long)(uintptr_t)extra;
	for (long i = 0; i < MAX_RECORDED_PARAMS; i++) {
		uint64_t v = 0;
		if (i < n)
			memcpy(&v, params[i], 8);
		last[LAST_LAUNCH_ARGS + i] = (long long)v;
	}
	unlock();
}

// fakecuda_last returns entry i of what the enum above lists, or -1 for
// any other i.
long long fakecuda_last(int i) {
	long long v = -1;
	lock();
	if (i >= 0 && i < LAST_COUNT)
		v = last[i];
	unlock();
	return v;
}

// ---- initialisation, version, errors --------------------------------------

// FAKECUDA_DEFAULT_INIT_ERROR is what cuInit returns where
// FAKECUDA_INIT_ERROR is unset: a build with 100 (CUDA_ERROR_NO_DEVICE) is
// a driver without a device, as on a machine with the driver's library but
// no GPU, whatever the environment of the processes that load it.
#ifndef FAKECUDA_DEFAULT_INIT_ERROR
#define FAKECUDA_DEFAULT_INIT_ERROR SUCCESS
#endif

CUresult cuInit(unsigned flags) {
	long fail = env_long("FAKECUDA_INIT_ERROR", FAKECUDA_DEFAULT_INIT_ERROR);
	if (flags != 0)
		return INVALID_VALUE;
	if (fail != SUCCESS)
		return (CUresult)fail;
	__atomic_store_n(&initialized, 1, __ATOMIC_SEQ_CST);
	return SUCCESS;
}

CUresult cuDriverGetVersion(int *v) {
	if (v == NULL)
		return INVALID_VALUE;
	*v = 13000;
	return SUCCESS;
}

static const struct {
	int code;
	const char *name, *text;
} errors[] = {
	{SUCCESS, "CUDA_SUCCESS", "no error"},
	{INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	{PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
	{INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	{PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	{PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	{CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	{LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_text(CUresult r, const char **p, int name) {
	if (p == NULL)
		return INVALID_VALUE;
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == r) {
			*p = name ? errors[i].name : errors[i].text;
			return SUCCESS;
		}
	}
	*p = NULL;
	return INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult r, const char **p) { return error_text(r, p, 1); }
CUresult cuGetErrorString(CUresult r, const char **p) { return error_text(r, p, 0); }

// ---- devices ---------------------------------------------------------------

CUresult cuDeviceGetCount(int *n) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (n == NULL)
		return INVALID_VALUE;
	*n = num_devices();
	return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	int r = check_ordinal(ordinal);
	if (r != SUCCESS)
		return r;
	if (d == NULL)
		return INVALID_VALUE;
	*d = (CUdevice)(ordinal + device_base());
	return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	if (name == NULL || len <= 0)
		return INVALID_VALUE;
	snprintf(name, (size_t)len, "Fake CUDA Device %d", ord);
	return SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	if (v == NULL || attr < 1 || attr > 150)
		return INVALID_VALUE;
	switch (attr) {
	case 1: *v = 1024; break;        // MAX_THREADS_PER_BLOCK
	case 13: *v = 1980000; break;    // CLOCK_RATE (kHz)
	case 16: *v = 132; break;        // MULTIPROCESSOR_COUNT
	case 18: *v = 0; break;          // INTEGRATED
	case 19: *v = 1; break;          // CAN_MAP_HOST_MEMORY
	case 33: *v = ord; break;        // PCI_BUS_ID
	case 34: *v = 0; break;          // PCI_DEVICE_ID
	case 36: *v = 3201000; break;    // MEMORY_CLOCK_RATE (kHz)
	case 37: *v = 6144; break;       // GLOBAL_MEMORY_BUS_WIDTH
	case 41: *v = 1; break;          // UNIFIED_ADDRESSING
	case 50: *v = 0; break;          // PCI_DOMAIN_ID
	case 75: *v = compute_capability(ord) / 10; break; // COMPUTE_CAPABILITY_MAJOR
	case 76: *v = compute_capability(ord) % 10; break; // COMPUTE_CAPABILITY_MINOR
	case 102: *v = 1; break;         // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	case 103: *v = !env_long("FAKECUDA_NO_POSIX_FD", 0); break; // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
	case 128: *v = 0; break;         // HANDLE_TYPE_FABRIC_SUPPORTED
	default: *v = 0; break;
	}
	return SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *n, CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	if (n == NULL)
		return INVALID_VALUE;
	*n = TOTAL_MEM;
	return SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	if (bus == NULL || len <= 0)
		return INVALID_VALUE;
	snprintf(bus, (size_t)len, "0000:%02X:00.0", ord);
	return SUCCESS;
}

// cuDeviceCanAccessPeer answers 1 for two distinct devices unless
// FAKECUDA_NO_PEER denies it, and 0 for a device and itself.
CUresult cuDeviceCanAccessPeer(int *v, CUdevice dev, CUdevice peer) {
	int a, b, r = device_of(dev, &a);
	if (r == SUCCESS)
		r = device_of(peer, &b);
	if (r != SUCCESS)
		return r;
	if (v == NULL)
		return INVALID_VALUE;
	*v = a != b && !no_peer(a, b);
	return SUCCESS;
}

static CUresult device_uuid(CUuuid *u, CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	if (u == NULL)
		return INVALID_VALUE;
	for (int i = 0; i < 16; i++)
		u->bytes[i] = (unsigned char)(0xFA + ord * 16 + i);
	return SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice dev) { return device_uuid(u, dev); }
CUresult cuDeviceGetUuid(CUuuid *u, CUdevice dev) { return device_uuid(u, dev); }

// ---- contexts --------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(struct ctx **c, CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	if (c == NULL)
		return INVALID_VALUE;
	lock();
	ctxs[ord].magic = MAGIC_CTX;
	ctxs[ord].ordinal = ord;
	ctxs[ord].deflt.ctx = &ctxs[ord];
	ctxs[ord].refs++;
	unlock();
	*c = &ctxs[ord];
	return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
	int ord, r = device_of(dev, &ord);
	if (r != SUCCESS)
		return r;
	lock();
	if (ctxs[ord].refs <= 0) {
		r = INVALID_CONTEXT;
	} else if (--ctxs[ord].refs == 0) {
		memset(ctxs[ord].peer, 0, sizeof ctxs[ord].peer);
	}
	unlock();
	return r;
}

CUresult cuCtxSetCurrent(struct ctx *c) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (c != NULL && !valid_ctx(c))
		return INVALID_CONTEXT;
	if (c != NULL && c->refs <= 0)
		return CONTEXT_IS_DESTROYED;
	current = c;
	return SUCCESS;
}

// The thread's context stack below current, for push and pop.
#define CTX_STACK 16
static __thread struct ctx *below[CTX_STACK];
static __thread int depth;

CUresult cuCtxPushCurrent_v2(struct ctx *c) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (c == NULL || !valid_ctx(c))
		return INVALID_CONTEXT;
	if (c->refs <= 0)
		return CONTEXT_IS_DESTROYED;
	if (depth == CTX_STACK)
		return INVALID_VALUE;
	below[depth++] = current;
	current = c;
	return SUCCESS;
}

CUresult cuCtxPopCurrent_v2(struct ctx **c) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (depth == 0 || current == NULL)
		return INVALID_CONTEXT;
	if (c != NULL)
		*c = current;
	current = below[--depth];
	return SUCCESS;
}

CUresult cuCtxGetCurrent(struct ctx **c) {
	if (!initialized)
		return NOT_INITIALIZED;
	if (c == NULL)
		return INVALID_VALUE;
	*c = current;
	return SUCCESS;
}

CUresult cuCtxSynchronize(void) {
	int r = need_ctx();
	if (r == SUCCESS)
		device_wait();
	return r;
}

CUresult cuCtxEnablePeerAccess(struct ctx *peer, unsigned flags) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (flags != 0)
		return INVALID_VALUE;
	if (!valid_ctx(peer) || peer->refs <= 0)
		return INVALID_CONTEXT;
	if (peer == current)
		return INVALID_DEVICE;
	if (no_peer(current->ordinal, peer->ordinal))
		return PEER_ACCESS_UNSUPPORTED;
	lock();
	if (current->peer[peer->ordinal])
		r = PEER_ACCESS_ALREADY_ENABLED;
	current->peer[peer->ordinal] = 1;
	unlock();
	return r;
}

// ---- memory ----------------------------------------------------------------

// cuMemGetAddressRange_v2 reports the live device allocation containing p.
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
	struct alloc *a;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	lock();
	a = find_alloc((uintptr_t)p, 1);
	if (a == NULL || a->host) {
		unlock();
		return NOT_FOUND;
	}
	if (base != NULL)
		*base = (CUdeviceptr)a->p;
	if (size != NULL)
		*size = a->n;
	unlock();
	return SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (free_bytes == NULL || total == NULL)
		return INVALID_VALUE;
	lock();
	*free_bytes = TOTAL_MEM - (size_t)n_dev_bytes;
	unlock();
	*total = TOTAL_MEM;
	return SUCCESS;
}

// cuMemAlloc_v2 returns 256-byte aligned host memory filled with 0xA5, as
// uninitialised device memory would hold garbage.
CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t n) {
	void *p = NULL;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (dp == NULL || n == 0)
		return INVALID_VALUE;
	if (n > TOTAL_MEM - (size_t)__atomic_load_n(&n_dev_bytes, __ATOMIC_RELAXED) || posix_memalign(&p, 256, n) != 0)
		return OUT_OF_MEMORY;
	memset(p, POISON, n);
	if ((r = add_alloc(p, n, 0)) != SUCCESS) {
		free(p);
		return r;
	}
	*dp = (CUdeviceptr)(uintptr_t)p;
	return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	device_wait();
	if (p == 0)
		return SUCCESS;
	if ((r = remove_alloc((char *)(uintptr_t)p, 0)) == STILL_MAPPED)
		return SUCCESS;
	if (r != SUCCESS)
		return r;
	free((void *)(uintptr_t)p);
	return SUCCESS;
}

static CUresult memset_check(CUdeviceptr p, size_t bytes, size_t align, uintptr_t stream) {
	int r = need_stream(stream);
	if (r != SUCCESS)
		return r;
	if (p % align != 0 || !covered((uintptr_t)p, bytes))
		return INVALID_VALUE;
	return SUCCESS;
}

static CUresult memset32(CUdeviceptr p, unsigned v, size_t n, uintptr_t stream) {
	int r;
	if (n > SIZE_MAX / 4)
		return INVALID_VALUE;
	if ((r = memset_check(p, n * 4, 4, stream)) != SUCCESS)
		return r;
	for (size_t i = 0; i < n; i++)
		memcpy((char *)(uintptr_t)p + 4 * i, &v, 4);
	return SUCCESS;
}

CUresult cuMemsetD32_v2(CUdeviceptr p, unsigned v, size_t n) { return memset32(p, v, n, 0); }
CUresult cuMemsetD32Async(CUdeviceptr p, unsigned v, size_t n, uintptr_t s) { return memset32(p, v, n, s); }

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, uintptr_t s) {
	int r = memset_check(p, n, 1, s);
	if (r != SUCCESS)
		return r;
	if (n > 0)
		memset((void *)(uintptr_t)p, v, n);
	return SUCCESS;
}

// copy_check checks a copy of n bytes; dst_dev and src_dev say which sides
// are device (or mapped host) memory, which must lie in one allocation.
static CUresult copy_check(uintptr_t dst, int dst_dev, uintptr_t src, int src_dev, size_t n, uintptr_t stream) {
	int r = need_stream(stream);
	if (r != SUCCESS)
		return r;
	if (n == 0)
		return SUCCESS;
	if (dst == 0 || src == 0)
		return INVALID_VALUE;
	if ((dst_dev && !covered(dst, n)) || (src_dev && !covered(src, n)))
		return INVALID_VALUE;
	return SUCCESS;
}

static CUresult copy(uintptr_t dst, int dst_dev, uintptr_t src, int src_dev, size_t n, uintptr_t stream) {
	int r = copy_check(dst, dst_dev, src, src_dev, n, stream);
	if (r == SUCCESS && n > 0)
		memmove((void *)dst, (const void *)src, n);
	return r;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 0, n, 0);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	return copy((uintptr_t)dst, 0, (uintptr_t)src, 1, n, 0);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, uintptr_t s) {
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 1, n, s);
}

// CUDA_MEMCPY2D, as cuda.h lays it out on 64-bit systems.
struct memcpy2d {
	size_t src_x, src_y;
	int src_type;
	const void *src_host;
	CUdeviceptr src_device;
	void *src_array;
	size_t src_pitch;
	size_t dst_x, dst_y;
	int dst_type;
	void *dst_host;
	CUdeviceptr dst_device;
	void *dst_array;
	size_t dst_pitch;
	size_t width, height;
};

// CUDA_MEMCPY3D, as cuda.h lays it out on 64-bit systems.
struct memcpy3d {
	size_t src_x, src_y, src_z, src_lod;
	int src_type;
	const void *src_host;
	CUdeviceptr src_device;
	void *src_array, *reserved0;
	size_t src_pitch, src_height;
	size_t dst_x, dst_y, dst_z, dst_lod;
	int dst_type;
	void *dst_host;
	CUdeviceptr dst_device;
	void *dst_array, *reserved1;
	size_t dst_pitch, dst_height;
	size_t width, height, depth;
};

// copy3d is cuMemcpy3DAsync_v2: device to device only, no offsets but
// the pointers, row by row, every row checked first. Static, so that the
// 2D copy calls this copy of the stub's, not an exported symbol another
// copy loaded earlier (RTLD_GLOBAL) would answer.
static CUresult copy3d(const struct memcpy3d *m, uintptr_t s) {
	if (m == NULL || m->src_type != 2 || m->dst_type != 2 || m->src_x || m->src_y || m->src_z || m->dst_x ||
	    m->dst_y || m->dst_z || m->src_pitch < m->width || m->dst_pitch < m->width ||
	    (m->depth > 1 && (m->src_height < m->height || m->dst_height < m->height)))
		return INVALID_VALUE;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t z = 0; z < m->depth; z++) {
			for (size_t y = 0; y < m->height; y++) {
				uintptr_t from = m->src_device + (z * m->src_height + y) * m->src_pitch;
				uintptr_t to = m->dst_device + (z * m->dst_height + y) * m->dst_pitch;
				if (pass == 0) {
					int r = copy_check(to, 1, from, 1, m->width, s);
					if (r != SUCCESS)
						return r;
				} else if (m->width > 0) {
					memmove((void *)to, (const void *)from, m->width);
				}
			}
		}
	}
	return SUCCESS;
}

CUresult cuMemcpy3DAsync_v2(const struct memcpy3d *m, uintptr_t s) { return copy3d(m, s); }

// cuMemcpy2DAsync_v2: the 3D copy of one slice.
CUresult cuMemcpy2DAsync_v2(const struct memcpy2d *m, uintptr_t s) {
	if (m == NULL)
		return INVALID_VALUE;
	struct memcpy3d m3 = {
		.src_x = m->src_x, .src_y = m->src_y, .src_type = m->src_type, .src_device = m->src_device,
		.src_pitch = m->src_pitch, .dst_x = m->dst_x, .dst_y = m->dst_y, .dst_type = m->dst_type,
		.dst_device = m->dst_device, .dst_pitch = m->dst_pitch, .width = m->width, .height = m->height, .depth = 1,
	};
	return copy3d(&m3, s);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, uintptr_t s) {
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 0, n, s);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, uintptr_t s) {
	return copy((uintptr_t)dst, 0, (uintptr_t)src, 1, n, s);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, struct ctx *dst_ctx, CUdeviceptr src, struct ctx *src_ctx, size_t n,
			   uintptr_t s) {
	if (!valid_ctx(dst_ctx) || dst_ctx->refs <= 0 || !valid_ctx(src_ctx) || src_ctx->refs <= 0)
		return INVALID_CONTEXT;
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 1, n, s);
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags) {
	void *p = NULL;
	int r = need_ctx();
	record(LAST_HOST_ALLOC_FLAGS, flags);
	if (r != SUCCESS)
		return r;
	if (pp == NULL || n == 0 || (flags & ~7u) != 0)
		return INVALID_VALUE;
	if (posix_memalign(&p, 4096, n) != 0)
		return OUT_OF_MEMORY;
	memset(p, POISON, n);
	if ((r = add_alloc(p, n, 1)) != SUCCESS) {
		free(p);
		return r;
	}
	*pp = p;
	return SUCCESS;
}

// cuMemHostGetDevicePointer_v2 returns the host address itself, as on a
// system with unified addressing.
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *dp, void *p, unsigned flags) {
	struct alloc *a;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (dp == NULL || flags != 0)
		return INVALID_VALUE;
	lock();
	a = find_alloc((uintptr_t)p, 1);
	if (a == NULL || !a->host)
		r = INVALID_VALUE;
	unlock();
	if (r == SUCCESS)
		*dp = (CUdeviceptr)(uintptr_t)p;
	return r;
}

CUresult cuMemFreeHost(void *p) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	device_wait();
	if ((r = remove_alloc(p, 1)) != SUCCESS)
		return r;
	free(p);
	return SUCCESS;
}

// ---- IPC -------------------------------------------------------------------

// An IPC handle holds "FAKECUDA", the allocation's address and size, and
// the process id, at the offsets below, and a pattern in every other byte.
// It opens only in the process that exported it, and only with all 64
// bytes intact: a handle passed wrongly by value does not open.
enum { IPC_PTR = 8, IPC_SIZE = 16, IPC_PID = 24, IPC_END = 28 };

static char ipc_pattern(int i) { return (char)(0x40 + 7 * i); }

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
	struct alloc *a;
	uint64_t ptr, size;
	uint32_t pid = (uint32_t)getpid();
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (h == NULL)
		return INVALID_VALUE;
	lock();
	a = find_alloc((uintptr_t)p, 1);
	if (a == NULL || a->host || a->vmm) { // legacy IPC cannot share cuMemCreate memory
		unlock();
		return INVALID_VALUE;
	}
	ptr = (uint64_t)(uintptr_t)a->p;
	size = a->n;
	unlock();
	memcpy(h->reserved, "FAKECUDA", 8);
	memcpy(h->reserved + IPC_PTR, &ptr, 8);
	memcpy(h->reserved + IPC_SIZE, &size, 8);
	memcpy(h->reserved + IPC_PID, &pid, 4);
	for (int i = IPC_END; i < (int)sizeof h->reserved; i++)
		h->reserved[i] = ipc_pattern(i);
	return SUCCESS;
}

// cuIpcOpenMemHandle_v2 wants flags CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, as
// the CUDA documentation says they must be.
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *dp, CUipcMemHandle h, unsigned flags) {
	struct alloc *a;
	uint64_t ptr, size;
	uint32_t pid;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (dp == NULL || flags != IPC_LAZY_ENABLE_PEER_ACCESS)
		return INVALID_VALUE;
	if (memcmp(h.reserved, "FAKECUDA", 8) != 0)
		return INVALID_VALUE;
	for (int i = IPC_END; i < (int)sizeof h.reserved; i++)
		if (h.reserved[i] != ipc_pattern(i))
			return INVALID_VALUE;
	memcpy(&ptr, h.reserved + IPC_PTR, 8);
	memcpy(&size, h.reserved + IPC_SIZE, 8);
	memcpy(&pid, h.reserved + IPC_PID, 4);
	if (pid != (uint32_t)getpid())
		return INVALID_HANDLE; // another process's memory: not reachable here
	lock();
	a = find_alloc((uintptr_t)ptr, 1);
	if (a == NULL || (uintptr_t)a->p != (uintptr_t)ptr || a->n != size) {
		r = INVALID_VALUE;
	} else {
		a->ipc_open++;
		n_ipc_open++;
	}
	unlock();
	if (r == SUCCESS)
		*dp = (CUdeviceptr)ptr;
	return r;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
	struct alloc *a;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	device_wait();
	lock();
	a = find_mapped((uintptr_t)p);
	if (a == NULL) {
		r = INVALID_VALUE;
	} else {
		a->ipc_open--;
		n_ipc_open--;
		if (a->freed && a->ipc_open == 0) {
			free(a->p);
			*a = (struct alloc){0};
		}
	}
	unlock();
	return r;
}

// ---- modules and launches --------------------------------------------------

enum { JIT_INFO_LOG_BUFFER = 3, JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4, JIT_ERROR_LOG_BUFFER = 5, JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

// elf_size is the extent of a 64-bit little-endian ELF image from its
// header: the end of its section or program header table, whichever is
// last (a cubin ends with its section headers); 0 if p is no such image.
static size_t elf_size(const unsigned char *p) {
	uint64_t phoff, shoff;
	uint16_t phentsize, phnum, shentsize, shnum;
	if (memcmp(p, "\x7f" "ELF", 4) != 0 || p[4] != 2 || p[5] != 1)
		return 0;
	memcpy(&phoff, p + 32, 8);
	memcpy(&shoff, p + 40, 8);
	memcpy(&phentsize, p + 54, 2);
	memcpy(&phnum, p + 56, 2);
	memcpy(&shentsize, p + 58, 2);
	memcpy(&shnum, p + 60, 2);
	uint64_t a = phoff + (uint64_t)phentsize * phnum, b = shoff + (uint64_t)shentsize * shnum;
	uint64_t n = a > b ? a : b;
	return n < 64 || n > ((uint64_t)1 << 32) ? 0 : (size_t)n;
}

// cubin_check answers whether a cubin (an ELF image) loads on the current
// context's device: FAKECUDA_CUBIN_ERROR when set, else
// CUDA_ERROR_NO_BINARY_FOR_GPU unless the image's architecture (the low
// byte of its ELF flags, major*10+minor: 0x5a for sm_90) has the device's
// major version and a minor version no newer than the device's, as the
// real driver requires.
static int cubin_check(const unsigned char *p) {
	uint32_t flags;
	int cc = compute_capability(current->ordinal);
	long fail = env_long("FAKECUDA_CUBIN_ERROR", SUCCESS);
	if (fail != SUCCESS)
		return (int)fail;
	memcpy(&flags, p + 48, 4);
	int sm = (int)(flags & 0xff);
	return sm / 10 == cc / 10 && sm % 10 <= cc % 10 ? SUCCESS : NO_BINARY_FOR_GPU;
}

// bad_ptx reports an image that is neither PTX nor a cubin: the error log
// buffer (when given) says so and names its size.
static int bad_ptx(unsigned nopts, int *opts, void **vals) {
	char *errlog = NULL;
	size_t errsize = 0;
	int errsize_at = -1;
	for (unsigned i = 0; i < nopts; i++) {
		if (opts[i] == JIT_ERROR_LOG_BUFFER)
			errlog = vals[i];
		if (opts[i] == JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
			errsize = (size_t)(uintptr_t)vals[i];
			errsize_at = (int)i;
		}
	}
	if (errlog != NULL && errsize > 0) {
		int n = snprintf(errlog, errsize,
				 "ptxas fatal   : fakecuda: image does not start with \"//\", not PTX "
				 "(error log buffer of %zu bytes)",
				 errsize);
		if (errsize_at >= 0 && n >= 0)
			vals[errsize_at] = (void *)(uintptr_t)((size_t)n < errsize ? (size_t)n : errsize - 1);
	}
	return INVALID_PTX;
}

// cuModuleLoadDataEx accepts PTX (an image starting with "//") and cubins
// (64-bit ELF images) that run on the device (cubin_check); a malformed
// ELF image fails with CUDA_ERROR_INVALID_IMAGE, anything else with
// CUDA_ERROR_INVALID_PTX and a message in the error log buffer, which
// names the buffer's size. The module keeps a copy of the image:
// cuModuleGetFunction finds only the entries it defines.
CUresult cuModuleLoadDataEx(struct module **m, const void *image, unsigned nopts, int *opts, void **vals) {
	struct module *mod;
	size_t n;
	int cubin = 0;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	device_wait();
	if (m == NULL || image == NULL || (nopts > 0 && (opts == NULL || vals == NULL)))
		return INVALID_VALUE;
	if (strncmp(image, "\x7f" "ELF", 4) == 0) {
		if ((n = elf_size(image)) == 0)
			return INVALID_IMAGE;
		if ((r = cubin_check(image)) != SUCCESS)
			return r;
		cubin = 1;
	} else if (strncmp(image, "//", 2) == 0) {
		n = strlen(image) + 1;
	} else {
		return bad_ptx(nopts, opts, vals);
	}
	if ((mod = calloc(1, sizeof *mod)) == NULL || (mod->image = malloc(n)) == NULL) {
		free(mod);
		return OUT_OF_MEMORY;
	}
	memcpy(mod->image, image, n);
	mod->image_len = n;
	mod->cubin = cubin;
	mod->magic = MAGIC_MODULE;
	mod->ctx = current;
	lock();
	n_modules++;
	if (cubin)
		n_cubin_loads++;
	else
		n_ptx_loads++;
	unlock();
	*m = mod;
	return SUCCESS;
}

static int valid_module(struct module *m) { return m != NULL && m->magic == MAGIC_MODULE && !m->dead; }

CUresult cuModuleUnload(struct module *m) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	device_wait();
	lock();
	if (!valid_module(m)) {
		r = INVALID_HANDLE;
	} else {
		m->dead = 1;
		free(m->image);
		m->image = NULL;
		n_modules--;
	}
	unlock();
	return r;
}

// contains reports whether the n bytes at p hold the k bytes at w, with
// a NUL before them when nul_before is set.
static int contains(const char *p, size_t n, const char *w, size_t k, int nul_before) {
	for (size_t i = nul_before ? 1 : 0; i + k <= n; i++)
		if (p[i] == w[0] && memcmp(p + i, w, k) == 0 && (!nul_before || p[i - 1] == 0))
			return 1;
	return 0;
}

// defines reports whether m's image defines kernel name: a PTX
// ".entry name(", or a cubin symbol (a NUL-delimited string of its
// string tables).
static int defines(struct module *m, const char *name) {
	char w[sizeof m->functions[0].name + 16];
	if (m->cubin)
		return contains(m->image, m->image_len, name, strlen(name) + 1, 1);
	int k = snprintf(w, sizeof w, ".entry %s(", name);
	return k > 0 && (size_t)k < sizeof w && contains(m->image, m->image_len, w, (size_t)k, 0);
}

// cuModuleGetFunction finds the entries the module's image defines, but
// those FAKECUDA_MISSING_FUNCTIONS lists.
CUresult cuModuleGetFunction(struct function **f, struct module *m, const char *name) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (f == NULL || name == NULL || strlen(name) >= sizeof m->functions[0].name)
		return INVALID_VALUE;
	if (listed("FAKECUDA_MISSING_FUNCTIONS", name))
		return NOT_FOUND;
	lock();
	if (!valid_module(m) || m->ctx != current) {
		r = INVALID_HANDLE;
		goto out;
	}
	for (int i = 0; i < m->nfunctions; i++) {
		if (strcmp(m->functions[i].name, name) == 0) {
			*f = &m->functions[i];
			goto out;
		}
	}
	if (!defines(m, name)) {
		r = NOT_FOUND;
		goto out;
	}
	if (m->nfunctions == MAX_FUNCTIONS) {
		r = OUT_OF_MEMORY;
		goto out;
	}
	struct function *fn = &m->functions[m->nfunctions++];
	fn->magic = MAGIC_FUNCTION;
	fn->mod = m;
	strcpy(fn->name, name);
	*f = fn;
out:
	unlock();
	return r;
}

// cuFuncSetAttribute accepts the preferred shared-memory carveout (attribute
// 9) of a live function in the current context: -1 or 0 to 100 percent.
CUresult cuFuncSetAttribute(struct function *f, int attr, int value) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	lock();
	if (f == NULL || f->magic != MAGIC_FUNCTION || !valid_module(f->mod))
		r = INVALID_HANDLE;
	else if (f->mod->ctx != current)
		r = INVALID_CONTEXT;
	else if (attr != 9 || value < -1 || value > 100)
		r = INVALID_VALUE;
	unlock();
	return r;
}

// hang_spec reads FAKECUDA_HANG=A,W,C,V into v; false when it is unset or
// malformed.
static int hang_spec(long v[4]) {
	const char *e = getenv("FAKECUDA_HANG");
	return e != NULL && sscanf(e, "%ld,%ld,%ld,%ld", &v[0], &v[1], &v[2], &v[3]) == 4 && v[0] >= 0;
}

// hang_word returns the address p FAKECUDA_HANG names in a launch's first
// parameter, or 0 when it is unset.
static uintptr_t hang_word(void **params) {
	long v[4];
	uint64_t p;
	if (params == NULL || !hang_spec(v))
		return 0;
	memcpy(&p, (const char *)params[0] + v[0], 8);
	return (uintptr_t)p;
}

// wait_hang waits, without the lock, as FAKECUDA_HANG says for the word at
// p, then stores its V.
static void wait_hang(uintptr_t p) {
	long v[4];
	if (!hang_spec(v))
		return;
	while (__atomic_load_n((const unsigned *)(p + v[1]), __ATOMIC_ACQUIRE) == 0)
		usleep(100);
	__atomic_store_n((unsigned *)(p + v[2]), (unsigned)v[3], __ATOMIC_RELEASE);
}

// cuLaunchKernel checks its arguments, counts the launch and runs nothing;
// the launch is queued work on its stream until the host waits for it
// (unless FAKECUDA_KERNELS_DONE: then it is done at once).
CUresult cuLaunchKernel(struct function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			unsigned bz, unsigned shared, uintptr_t stream, void **params, void **extra) {
	long long n;
	long fail_after;
	record_launch((uintptr_t)f, (unsigned[6]){gx, gy, gz, bx, by, bz}, shared, stream, params, extra);
	int r = need_stream(stream);
	if (r != SUCCESS)
		return r;
	if (f == NULL || f->magic != MAGIC_FUNCTION || !valid_module(f->mod))
		return INVALID_HANDLE;
	if (f->mod->ctx != current)
		return INVALID_CONTEXT;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || (params != NULL && extra != NULL))
		return INVALID_VALUE;
	if ((unsigned long long)bx * by * bz > 1024 || bz > 64 || shared > 227 * 1024)
		return LAUNCH_OUT_OF_RESOURCES;
	fail_after = env_long("FAKECUDA_FAIL_LAUNCH_AFTER", -1);
	n = __atomic_fetch_add(&n_launch_attempts, 1, __ATOMIC_SEQ_CST);
	if (fail_after >= 0 && n >= fail_after) {
		__atomic_fetch_add(&n_launch_failures, 1, __ATOMIC_SEQ_CST);
		return LAUNCH_FAILED;
	}
	uintptr_t hang = hang_word(params);
	lock();
	struct stream *st = stream_of(stream);
	if (st->capturing) {
		st->captured++; // runs when the graph is launched
		unlock();
		return SUCCESS;
	}
	__atomic_fetch_add(&n_launches, 1, __ATOMIC_SEQ_CST);
	st->launched = 1;
	if (env_long("FAKECUDA_KERNELS_DONE", 0) == 0)
		st->queued++;
	if (hang != 0)
		st->hang = hang;
	unlock();
	return SUCCESS;
}

// ---- graphs: a capture records the launches made on the stream; the
// executable graph queues them all when launched ----------------------------

CUresult cuStreamBeginCapture_v2(uintptr_t s, int mode) {
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	if (s <= 2 || mode < 0 || mode > 2)
		return s <= 2 ? STREAM_CAPTURE_UNSUPPORTED : INVALID_VALUE;
	lock();
	struct stream *st = stream_of(s);
	if (st->capturing) {
		unlock();
		return ILLEGAL_STATE;
	}
	st->capturing = 1;
	st->captured = 0;
	unlock();
	return SUCCESS;
}

CUresult cuStreamIsCapturing(uintptr_t s, int *status) {
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	if (status == NULL)
		return INVALID_VALUE;
	lock();
	*status = s > 2 && stream_of(s)->capturing ? 1 : 0;
	unlock();
	return SUCCESS;
}

static struct graph *new_graph(unsigned magic, long long launches) {
	struct graph *g = calloc(1, sizeof *g);
	if (g != NULL) {
		g->magic = magic;
		g->ctx = current;
		g->launches = launches;
	}
	return g;
}

static struct graph *graph_of(uintptr_t g, unsigned magic) {
	struct graph *gr = (struct graph *)g;
	return gr == NULL || gr->magic != magic || gr->dead ? NULL : gr;
}

CUresult cuStreamEndCapture(uintptr_t s, struct graph **g) {
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	if (g == NULL || s <= 2)
		return INVALID_VALUE;
	lock();
	struct stream *st = stream_of(s);
	if (!st->capturing) {
		unlock();
		return ILLEGAL_STATE;
	}
	st->capturing = 0;
	*g = new_graph(MAGIC_GRAPH, st->captured);
	unlock();
	return *g == NULL ? OUT_OF_MEMORY : SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(struct graph **e, uintptr_t g, unsigned long long flags) {
	int r = need_ctx();
	struct graph *gr = graph_of(g, MAGIC_GRAPH);
	if (r != SUCCESS)
		return r;
	if (e == NULL || gr == NULL || flags != 0)
		return INVALID_VALUE;
	*e = new_graph(MAGIC_GRAPH_EXEC, gr->launches);
	return *e == NULL ? OUT_OF_MEMORY : SUCCESS;
}

CUresult cuGraphLaunch(uintptr_t e, uintptr_t s) {
	struct graph *ex = graph_of(e, MAGIC_GRAPH_EXEC);
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	if (ex == NULL || ex->ctx != current)
		return INVALID_HANDLE;
	lock();
	struct stream *st = stream_of(s);
	if (st->capturing) {
		st->captured += ex->launches;
	} else if (ex->launches > 0) {
		st->launched = 1;
		st->queued += ex->launches;
		__atomic_fetch_add(&n_launches, ex->launches, __ATOMIC_SEQ_CST);
	}
	unlock();
	return SUCCESS;
}

static CUresult destroy_graph(uintptr_t g, unsigned magic) {
	int r = need_ctx();
	struct graph *gr = graph_of(g, magic);
	if (r != SUCCESS)
		return r;
	if (gr == NULL)
		return INVALID_HANDLE;
	gr->dead = 1;
	return SUCCESS;
}

CUresult cuGraphExecDestroy(uintptr_t e) { return destroy_graph(e, MAGIC_GRAPH_EXEC); }
CUresult cuGraphDestroy(uintptr_t g) { return destroy_graph(g, MAGIC_GRAPH); }

// ---- streams and events ----------------------------------------------------

CUresult cuStreamCreate(struct stream **s, unsigned flags) {
	struct stream *st;
	int r = need_ctx();
	record(LAST_STREAM_FLAGS, flags);
	if (r != SUCCESS)
		return r;
	if (s == NULL || (flags & ~1u) != 0)
		return INVALID_VALUE;
	if ((st = calloc(1, sizeof *st)) == NULL)
		return OUT_OF_MEMORY;
	st->magic = MAGIC_STREAM;
	st->ctx = current;
	lock();
	st->next = all_streams;
	all_streams = st;
	n_streams++;
	unlock();
	*s = st;
	return SUCCESS;
}

CUresult cuStreamDestroy_v2(uintptr_t s) {
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (s <= 2)
		return INVALID_HANDLE;
	lock();
	if ((r = check_stream(s)) == SUCCESS) {
		((struct stream *)s)->dead = 1;
		n_streams--;
	}
	unlock();
	return r;
}

// cuStreamSynchronize settles the stream's work. It returns
// FAKECUDA_SYNC_ERROR when that is set and a kernel was ever launched on
// the stream: a kernel failed (its work is over all the same).
CUresult cuStreamSynchronize(uintptr_t s) {
	struct stream *st;
	CUresult fail;
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	fail = (CUresult)env_long("FAKECUDA_SYNC_ERROR", SUCCESS);
	lock();
	st = stream_of(s);
	uintptr_t hang = pending(st) ? st->hang : 0;
	st->hang = 0;
	unlock();
	if (hang != 0)
		wait_hang(hang);
	lock();
	st->done = st->queued;
	if (st->launched)
		r = fail;
	unlock();
	return r;
}

// cuStreamGetCtx names the context a stream belongs to; the default
// streams belong to the current one.
CUresult cuStreamGetCtx(uintptr_t s, struct ctx **c) {
	struct stream *st = (struct stream *)s;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (c == NULL)
		return INVALID_VALUE;
	if (s <= 2) {
		*c = current;
		return SUCCESS;
	}
	if (st->magic != MAGIC_STREAM || st->dead)
		return INVALID_HANDLE;
	*c = st->ctx;
	return SUCCESS;
}

// cuStreamQuery answers CUDA_ERROR_NOT_READY while the stream has work
// queued.
CUresult cuStreamQuery(uintptr_t s) {
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	lock();
	if (pending(stream_of(s)))
		r = NOT_READY;
	unlock();
	return r;
}

CUresult cuEventCreate(struct event **e, unsigned flags) {
	struct event *ev;
	int r = need_ctx();
	record(LAST_EVENT_FLAGS, flags);
	if (r != SUCCESS)
		return r;
	if (e == NULL || (flags & ~7u) != 0)
		return INVALID_VALUE;
	if ((ev = calloc(1, sizeof *ev)) == NULL)
		return OUT_OF_MEMORY;
	ev->magic = MAGIC_EVENT;
	ev->ctx = current;
	ev->flags = flags;
	lock();
	n_events++;
	unlock();
	*e = ev;
	return SUCCESS;
}

CUresult cuEventRecord(uintptr_t e, uintptr_t s) {
	struct event *ev = event_of(e);
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	if (ev == NULL || ev->ctx != current)
		return INVALID_HANDLE;
	lock();
	ev->recorded = 1;
	ev->stream = stream_of(s);
	ev->seq = ev->stream->queued;
	unlock();
	return SUCCESS;
}

// cuEventSynchronize settles the work queued before the event's record.
CUresult cuEventSynchronize(uintptr_t e) {
	struct event *ev = event_of(e);
	if (!initialized)
		return NOT_INITIALIZED;
	if (ev == NULL)
		return INVALID_HANDLE;
	lock();
	if (ev->stream != NULL && ev->stream->done < ev->seq)
		ev->stream->done = ev->seq;
	unlock();
	return SUCCESS;
}

// cuEventQuery answers CUDA_ERROR_NOT_READY while the work queued before
// the event's record is not settled; an event never recorded is done.
CUresult cuEventQuery(uintptr_t e) {
	struct event *ev = event_of(e);
	CUresult r = SUCCESS;
	if (!initialized)
		return NOT_INITIALIZED;
	if (ev == NULL)
		return INVALID_HANDLE;
	lock();
	if (ev->stream != NULL && ev->stream->done < ev->seq)
		r = NOT_READY;
	unlock();
	return r;
}

// cuStreamWaitEvent checks its handles; the stub runs nothing, so there is
// no order to keep.
CUresult cuStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned flags) {
	struct event *ev = event_of(e);
	int r = need_stream(s);
	if (r != SUCCESS)
		return r;
	if (ev == NULL || ev->ctx != current || flags != 0)
		return INVALID_HANDLE;
	return SUCCESS;
}

// cuEventElapsedTime(_v2) reports 0.001 ms between any two recorded timing
// events.
static CUresult elapsed(float *ms, uintptr_t start, uintptr_t end) {
	struct event *a = event_of(start), *b = event_of(end);
	if (!initialized)
		return NOT_INITIALIZED;
	if (ms == NULL)
		return INVALID_VALUE;
	if (a == NULL || b == NULL || (a->flags & EVENT_DISABLE_TIMING) || (b->flags & EVENT_DISABLE_TIMING))
		return INVALID_HANDLE;
	if (!a->recorded || !b->recorded)
		return NOT_READY;
	*ms = 0.001f;
	return SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *ms, uintptr_t start, uintptr_t end) { return elapsed(ms, start, end); }
CUresult cuEventElapsedTime(float *ms, uintptr_t start, uintptr_t end) { return elapsed(ms, start, end); }

CUresult cuEventDestroy_v2(uintptr_t e) {
	struct event *ev = event_of(e);
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	lock();
	if (ev == NULL || ev->dead) {
		r = INVALID_HANDLE;
	} else {
		ev->dead = 1;
		n_events--;
	}
	unlock();
	return r;
}

// ---- virtual memory management ---------------------------------------------

// A physical allocation of cuMemCreate is a memfd of its size, so that its
// exported file descriptor, passed to another process (SCM_RIGHTS) and
// imported there, maps the same memory: what one process writes, the
// other reads. cuMemAddressReserve reserves address space (an
// inaccessible anonymous mapping), cuMemMap maps the memfd over it
// (MAP_SHARED, MAP_FIXED), and a mapping counts as a device allocation
// for memsets, copies and cuMemGetAddressRange_v2, but not for cuMemFree_v2
// or cuIpcGetMemHandle, which refuse it as the real driver does. The
// granularity is 2 MiB, as on current GPUs (Linux only: elsewhere the
// stub lacks these optional entry points). Fabric handles are not
// supported (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED is 0 and
// asking for one fails with CUDA_ERROR_NOT_SUPPORTED).

static long long n_vmm_allocs, n_vmm_maps, n_vmm_reserved, n_vmm_exports;

#ifdef __linux__ // memfd_create

#define VMM_GRANULARITY ((size_t)2 << 20)
#define MAX_VMM 1024
#define VMM_HANDLE_TAG 0xF00D000000000000ull
#define MEM_HANDLE_TYPE_POSIX_FD 0x1
#define MEM_HANDLE_TYPE_FABRIC 0x8
#define MEMFD_NAME "fakecuda-vmm"

struct mem_location { int type, id; };

struct mem_prop {
	int type;
	unsigned requested;
	struct mem_location location;
	void *win32;
	unsigned char compression, rdma;
	unsigned short usage;
	unsigned char reserved[4];
};

struct mem_access { struct mem_location location; int flags; };

struct vmm_alloc {
	int fd;         // the memfd, -1 when the slot is free
	size_t n;
	unsigned types; // handle types it may be exported as
	int released;   // cuMemRelease called: freed with its last mapping
	int maps;       // live cuMemMap mappings of it
};

struct vmm_range {
	uintptr_t p;
	size_t n;
	int mapped; // -1 when only reserved, else the vmm_alloc slot mapped there
	unsigned access; // bit i: device i may read and write it
};

static struct vmm_alloc vmm_allocs[MAX_VMM];
static struct vmm_range vmm_ranges[MAX_VMM];

static int check_prop(const struct mem_prop *p) {
	if (p == NULL || p->type != 1 || p->location.type != 1 || p->win32 != NULL)
		return INVALID_VALUE;
	if (p->requested & ~(unsigned)(MEM_HANDLE_TYPE_POSIX_FD | MEM_HANDLE_TYPE_FABRIC))
		return INVALID_VALUE;
	if (p->requested & MEM_HANDLE_TYPE_FABRIC)
		return NOT_SUPPORTED;
	return check_ordinal(p->location.id);
}

CUresult cuMemGetAllocationGranularity(size_t *g, const struct mem_prop *prop, int option) {
	int r = check_prop(prop);
	if (r != SUCCESS)
		return r;
	if (g == NULL || (option != 0 && option != 1))
		return INVALID_VALUE;
	*g = VMM_GRANULARITY;
	return SUCCESS;
}

// vmm_slot returns the slot of a live allocation handle, or -1. Call with
// the lock held.
static int vmm_slot(unsigned long long h) {
	unsigned long long i = h & ~VMM_HANDLE_TAG;
	if ((h & VMM_HANDLE_TAG) != VMM_HANDLE_TAG || i >= MAX_VMM || vmm_allocs[i].fd < 0 || vmm_allocs[i].released)
		return -1;
	return (int)i;
}

// vmm_add takes a free slot for fd and returns its handle in *h.
static int vmm_add(int fd, size_t n, unsigned types, unsigned long long *h) {
	int r = OUT_OF_MEMORY;
	lock();
	for (int i = 0; i < MAX_VMM; i++) {
		if (vmm_allocs[i].fd < 0) {
			vmm_allocs[i] = (struct vmm_alloc){.fd = fd, .n = n, .types = types};
			n_vmm_allocs++;
			*h = VMM_HANDLE_TAG | (unsigned long long)i;
			r = SUCCESS;
			break;
		}
	}
	unlock();
	return r;
}

// vmm_put frees slot i once it is released and unmapped. Call with the
// lock held.
static void vmm_put(int i) {
	if (vmm_allocs[i].released && vmm_allocs[i].maps == 0) {
		close(vmm_allocs[i].fd);
		vmm_allocs[i] = (struct vmm_alloc){.fd = -1};
		n_vmm_allocs--;
	}
}

static void vmm_init_once(void) {
	static int done;
	lock();
	if (!done) {
		for (int i = 0; i < MAX_VMM; i++) {
			vmm_allocs[i].fd = -1;
			vmm_ranges[i].mapped = -1;
		}
		done = 1;
	}
	unlock();
}

// poison_fd fills the new memfd with POISON, as cuMemAlloc_v2 fills its
// memory: uninitialised device memory holds garbage.
static int poison_fd(int fd, size_t n) {
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 0;
	memset(m, POISON, n);
	munmap(m, n);
	return 1;
}

CUresult cuMemCreate(unsigned long long *h, size_t n, const struct mem_prop *prop, unsigned long long flags) {
	int fd, r = need_ctx();
	if (r != SUCCESS)
		return r;
	if ((r = check_prop(prop)) != SUCCESS)
		return r;
	if (h == NULL || n == 0 || n % VMM_GRANULARITY != 0 || flags != 0)
		return INVALID_VALUE;
	vmm_init_once();
	fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return OUT_OF_MEMORY;
	if (ftruncate(fd, (off_t)n) != 0 || !poison_fd(fd, n) || (r = vmm_add(fd, n, prop->requested, h)) != SUCCESS) {
		close(fd);
		return r == SUCCESS ? OUT_OF_MEMORY : r;
	}
	return SUCCESS;
}

CUresult cuMemRelease(unsigned long long h) {
	int i, r = need_ctx();
	if (r != SUCCESS)
		return r;
	vmm_init_once();
	lock();
	if ((i = vmm_slot(h)) < 0) {
		r = INVALID_VALUE;
	} else {
		vmm_allocs[i].released = 1;
		vmm_put(i);
	}
	unlock();
	return r;
}

// vmm_range_at returns the reserved range starting at p of n bytes, or
// NULL. Call with the lock held.
static struct vmm_range *vmm_range_at(uintptr_t p, size_t n) {
	for (int i = 0; i < MAX_VMM; i++)
		if (vmm_ranges[i].p == p && p != 0 && vmm_ranges[i].n == n)
			return &vmm_ranges[i];
	return NULL;
}

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr, unsigned long long flags) {
	void *m;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (p == NULL || n == 0 || n % VMM_GRANULARITY != 0 || (align != 0 && align % VMM_GRANULARITY != 0) || addr != 0 || flags != 0)
		return INVALID_VALUE;
	vmm_init_once();
	m = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return OUT_OF_MEMORY;
	r = OUT_OF_MEMORY;
	lock();
	for (int i = 0; i < MAX_VMM; i++) {
		if (vmm_ranges[i].p == 0) {
			vmm_ranges[i] = (struct vmm_range){.p = (uintptr_t)m, .n = n, .mapped = -1};
			n_vmm_reserved++;
			r = SUCCESS;
			break;
		}
	}
	unlock();
	if (r != SUCCESS) {
		munmap(m, n);
		return r;
	}
	*p = (CUdeviceptr)(uintptr_t)m;
	return SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t n) {
	struct vmm_range *g;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	vmm_init_once();
	lock();
	g = vmm_range_at((uintptr_t)p, n);
	if (g == NULL || g->mapped >= 0) {
		r = INVALID_VALUE;
	} else {
		munmap((void *)g->p, g->n);
		*g = (struct vmm_range){.mapped = -1};
		n_vmm_reserved--;
	}
	unlock();
	return r;
}

// cuMemMap maps all of an allocation's first n bytes over a whole
// reserved range (the stub takes no offsets nor partial ranges).
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t offset, unsigned long long h, unsigned long long flags) {
	struct vmm_range *g;
	int i, r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (offset != 0 || flags != 0)
		return INVALID_VALUE;
	vmm_init_once();
	lock();
	g = vmm_range_at((uintptr_t)p, n);
	i = vmm_slot(h);
	if (g == NULL || g->mapped >= 0 || i < 0 || n > vmm_allocs[i].n) {
		unlock();
		return INVALID_VALUE;
	}
	if (mmap((void *)g->p, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, vmm_allocs[i].fd, 0) == MAP_FAILED) {
		unlock();
		return OUT_OF_MEMORY;
	}
	g->mapped = i;
	g->access = 0;
	vmm_allocs[i].maps++;
	n_vmm_maps++;
	r = add_alloc_locked((char *)g->p, n, 0, 1);
	unlock();
	return r;
}

// cuMemUnmap waits for the device, as the real driver may.
CUresult cuMemUnmap(CUdeviceptr p, size_t n) {
	struct vmm_range *g;
	int i, r = need_ctx();
	if (r != SUCCESS)
		return r;
	device_wait();
	vmm_init_once();
	lock();
	g = vmm_range_at((uintptr_t)p, n);
	if (g == NULL || g->mapped < 0) {
		unlock();
		return INVALID_VALUE;
	}
	i = g->mapped;
	mmap((void *)g->p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	g->mapped = -1;
	vmm_allocs[i].maps--;
	n_vmm_maps--;
	vmm_put(i);
	remove_alloc_locked((char *)g->p, 0, 1);
	unlock();
	return SUCCESS;
}

// cuMemSetAccess wants whole mapped ranges and read-write access for
// valid devices.
CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const struct mem_access *desc, size_t count) {
	struct vmm_range *g;
	unsigned bits = 0;
	int r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (desc == NULL || count == 0)
		return INVALID_VALUE;
	for (size_t k = 0; k < count; k++) {
		if (desc[k].location.type != 1 || desc[k].flags != 3 || check_ordinal(desc[k].location.id) != SUCCESS)
			return INVALID_VALUE;
		bits |= 1u << desc[k].location.id;
	}
	vmm_init_once();
	lock();
	g = vmm_range_at((uintptr_t)p, n);
	if (g == NULL || g->mapped < 0)
		r = INVALID_VALUE;
	else
		g->access |= bits;
	unlock();
	return r;
}

// cuMemExportToShareableHandle gives a new descriptor of the memfd (the
// caller closes it) for an allocation made exportable as one.
CUresult cuMemExportToShareableHandle(void *out, unsigned long long h, int type, unsigned long long flags) {
	int i, fd = -1, r = need_ctx();
	if (r != SUCCESS)
		return r;
	if (out == NULL || flags != 0)
		return INVALID_VALUE;
	if (type == MEM_HANDLE_TYPE_FABRIC)
		return NOT_SUPPORTED;
	if (type != MEM_HANDLE_TYPE_POSIX_FD)
		return INVALID_VALUE;
	vmm_init_once();
	lock();
	i = vmm_slot(h);
	if (i < 0 || !(vmm_allocs[i].types & MEM_HANDLE_TYPE_POSIX_FD))
		r = INVALID_VALUE;
	else if ((fd = fcntl(vmm_allocs[i].fd, F_DUPFD_CLOEXEC, 0)) < 0)
		r = OUT_OF_MEMORY;
	else
		n_vmm_exports++;
	unlock();
	if (r == SUCCESS)
		*(int *)out = fd;
	return r;
}

// is_stub_memfd reports whether fd is a memfd this stub made (in any
// process): a descriptor of anything else names no allocation.
static int is_stub_memfd(int fd, size_t *n) {
	char path[64], target[128];
	struct stat st;
	ssize_t k;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	k = readlink(path, target, sizeof target - 1);
	if (k <= 0)
		return 0;
	target[k] = 0;
	if (strncmp(target, "/memfd:" MEMFD_NAME " ", strlen("/memfd:" MEMFD_NAME " ")) != 0 || fstat(fd, &st) != 0 ||
	    st.st_size <= 0 || (size_t)st.st_size % VMM_GRANULARITY != 0)
		return 0;
	*n = (size_t)st.st_size;
	return 1;
}

// cuMemImportFromShareableHandle takes the descriptor as the pointer's
// value, as the real driver does for CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
// and keeps a descriptor of its own: the caller's stays the caller's.
CUresult cuMemImportFromShareableHandle(unsigned long long *h, void *os_handle, int type) {
	int fd = (int)(intptr_t)os_handle, own, r = need_ctx();
	size_t n;
	if (r != SUCCESS)
		return r;
	if (h == NULL)
		return INVALID_VALUE;
	if (type == MEM_HANDLE_TYPE_FABRIC)
		return NOT_SUPPORTED;
	if (type != MEM_HANDLE_TYPE_POSIX_FD || fd < 0 || !is_stub_memfd(fd, &n))
		return INVALID_VALUE;
	vmm_init_once();
	if ((own = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return OUT_OF_MEMORY;
	if ((r = vmm_add(own, n, MEM_HANDLE_TYPE_POSIX_FD, h)) != SUCCESS)
		close(own);
	return r;
}

#endif // __linux__

// ---- counters for tests ----------------------------------------------------

// fakecuda_counter returns counter i: 0 launches that succeeded, 1 launches
// failed by FAKECUDA_FAIL_LAUNCH_AFTER, 2 live cuMemAlloc allocations,
// 3 their bytes, 4 live cuMemHostAlloc allocations, 5 live streams, 6 live
// events, 7 loaded modules, 8 open IPC mappings, 9 primary context retains
// not yet released (all devices), 10 device-wide waits (see the top of
// this file), 11 those of them made while work was queued, 12 PTX images
// and 13 cubins loaded (running totals), 14 live cuMemCreate or imported
// allocations, 15 live cuMemMap mappings, 16 reserved address ranges, 17
// file descriptors exported (a running total); -1 for any other i.
long long fakecuda_counter(int i) {
	long long v = -1;
	lock();
	switch (i) {
	case 0: v = n_launches; break;
	case 1: v = n_launch_failures; break;
	case 2: v = n_dev_allocs; break;
	case 3: v = n_dev_bytes; break;
	case 4: v = n_host_allocs; break;
	case 5: v = n_streams; break;
	case 6: v = n_events; break;
	case 7: v = n_modules; break;
	case 8: v = n_ipc_open; break;
	case 9:
		v = 0;
		for (int d = 0; d < MAX_DEVICES; d++)
			v += ctxs[d].refs;
		break;
	case 10: v = n_device_waits; break;
	case 11: v = n_busy_device_waits; break;
	case 12: v = n_ptx_loads; break;
	case 13: v = n_cubin_loads; break;
	case 14: v = n_vmm_allocs; break;
	case 15: v = n_vmm_maps; break;
	case 16: v = n_vmm_reserved; break;
	case 17: v = n_vmm_exports; break;
	}
	unlock();
	return v;
}
