// A stub NCCL for the tests of internal/nccl: it exports the entry points
// the binding binds, checks their arguments about as NCCL does, and moves
// bytes only where no other process is involved (a rank's exchange with
// itself, an all-gather of one rank), on host memory: its "device"
// pointers are host pointers. Communicators made non-blocking report
// ncclInProgress for FAKENCCL_INIT_POLLS polls of ncclCommGetAsyncError
// (default 0), or forever with FAKENCCL_INIT_HANG=1 until aborted.
// FAKENCCL_VERSION sets the version code (default 22809),
// FAKENCCL_INIT_ERROR makes ncclCommInitRankConfig fail with that result.
// fakenccl_last_init and fakenccl_counts report what tests check.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t;
enum { SUCCESS = 0, SYSTEM = 2, INTERNAL = 3, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, IN_PROGRESS = 7 };

typedef struct { unsigned char internal[128]; } ncclUniqueId;

// The leading fields of every ncclConfig_t version.
typedef struct {
	size_t size;
	unsigned magic;
	unsigned version;
	int blocking;
} config_head;

#define CONFIG_MAGIC 0xcafebeefu
#define COMM_MAGIC 0x6e63636cu
#define MAX_PENDING 64

struct comm {
	unsigned magic;
	int nranks, rank, blocking;
	long polls;  // ncclInProgress answers left; -1: until aborted
};

// A send to or a receive from this rank itself, waiting for ncclGroupEnd.
struct pending {
	int send;
	const void *buf;
	size_t bytes;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_error[256];
static unsigned long id_counter;
static int group_depth;
static struct pending pending[MAX_PENDING];
static int npending;
static long live_comms, aborts, sends, recvs, allgathers;
static ncclUniqueId last_id;
static int last_nranks = -1, last_rank = -1, last_blocking = -2;

static ncclResult_t fail(ncclResult_t r, const char *msg) {
	snprintf(last_error, sizeof last_error, "%s", msg);
	return r;
}

static long env_long(const char *name, long def) {
	const char *v = getenv(name);
	return v && *v ? strtol(v, NULL, 10) : def;
}

static size_t type_size(int t) {
	static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
	return t >= 0 && t < 12 ? sizes[t] : 0;
}

static int valid(const struct comm *c) { return c != NULL && c->magic == COMM_MAGIC; }

ncclResult_t ncclGetVersion(int *version) {
	if (version == NULL) return fail(INVALID_ARGUMENT, "version is NULL");
	*version = (int)env_long("FAKENCCL_VERSION", 22809);
	return SUCCESS;
}

const char *ncclGetErrorString(ncclResult_t r) {
	static const char *names[] = {"no error", "unhandled cuda error", "unhandled system error", "internal error",
		"invalid argument", "invalid usage", "remote process exited or there was a network error",
		"NCCL operation in progress", "operation timed out"};
	return r >= 0 && r < 9 ? names[r] : "unknown result code";
}

const char *ncclGetLastError(struct comm *c) {
	(void)c;
	return last_error;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	if (id == NULL) return fail(INVALID_ARGUMENT, "uniqueId is NULL");
	pthread_mutex_lock(&mu);
	unsigned long n = ++id_counter;
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 128; i++) id->internal[i] = (unsigned char)(n * 131 + (unsigned long)i * 7 + 1);
	return SUCCESS;
}

// The unique id comes by value (128 bytes on the stack under System V).
ncclResult_t ncclCommInitRankConfig(struct comm **out, int nranks, ncclUniqueId id, int rank, config_head *config) {
	pthread_mutex_lock(&mu);
	last_id = id;
	last_nranks = nranks;
	last_rank = rank;
	last_blocking = config ? config->blocking : -1;
	pthread_mutex_unlock(&mu);
	if (out == NULL) return fail(INVALID_ARGUMENT, "comm is NULL");
	if (nranks < 1 || rank < 0 || rank >= nranks) return fail(INVALID_ARGUMENT, "rank out of range");
	if (config != NULL && (config->magic != CONFIG_MAGIC || config->size < sizeof(config_head) || config->version < 21400))
		return fail(INVALID_ARGUMENT, "config not initialized");
	long e = env_long("FAKENCCL_INIT_ERROR", 0);
	if (e != 0) return fail((ncclResult_t)e, "init failed as FAKENCCL_INIT_ERROR asked");
	struct comm *c = calloc(1, sizeof *c);
	if (c == NULL) return fail(SYSTEM, "out of memory");
	c->magic = COMM_MAGIC;
	c->nranks = nranks;
	c->rank = rank;
	c->blocking = config ? config->blocking != 0 : 1;
	c->polls = env_long("FAKENCCL_INIT_HANG", 0) ? -1 : env_long("FAKENCCL_INIT_POLLS", 0);
	pthread_mutex_lock(&mu);
	live_comms++;
	pthread_mutex_unlock(&mu);
	*out = c;
	return !c->blocking && c->polls != 0 ? IN_PROGRESS : SUCCESS;
}

ncclResult_t ncclCommGetAsyncError(struct comm *c, ncclResult_t *r) {
	if (!valid(c) || r == NULL) return fail(INVALID_ARGUMENT, "invalid communicator");
	if (c->polls > 0) c->polls--;
	*r = c->polls != 0 ? IN_PROGRESS : SUCCESS;
	return SUCCESS;
}

static ncclResult_t release(struct comm *c, int abort) {
	if (!valid(c)) return fail(INVALID_ARGUMENT, "invalid communicator");
	c->magic = 0;
	free(c);
	pthread_mutex_lock(&mu);
	live_comms--;
	aborts += abort;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

ncclResult_t ncclCommDestroy(struct comm *c) { return release(c, 0); }
ncclResult_t ncclCommAbort(struct comm *c) { return release(c, 1); }

ncclResult_t ncclGroupStart(void) {
	group_depth++;
	return SUCCESS;
}

// ncclGroupEnd pairs this rank's sends to itself with its receives from
// itself, in order, and copies.
ncclResult_t ncclGroupEnd(void) {
	if (group_depth == 0) return fail(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
	if (--group_depth > 0) return SUCCESS;
	int s = 0, r = 0;
	for (;;) {
		while (s < npending && !pending[s].send) s++;
		while (r < npending && pending[r].send) r++;
		if (s == npending || r == npending) break;
		if (pending[s].bytes != pending[r].bytes) {
			npending = 0;
			return fail(INVALID_USAGE, "a send to self and a receive from self differ in size");
		}
		memcpy((void *)pending[r].buf, pending[s].buf, pending[s].bytes);
		s++, r++;
	}
	npending = 0;
	return SUCCESS;
}

static ncclResult_t p2p(int send, const void *buf, size_t count, int type, int peer, struct comm *c) {
	if (!valid(c)) return fail(INVALID_ARGUMENT, "invalid communicator");
	if (type_size(type) == 0) return fail(INVALID_ARGUMENT, "invalid data type");
	if (peer < 0 || peer >= c->nranks) return fail(INVALID_ARGUMENT, "peer out of range");
	if (count > 0 && buf == NULL) return fail(INVALID_ARGUMENT, "buffer is NULL");
	if (send) sends++; else recvs++;
	if (peer == c->rank) {
		if (group_depth == 0) return fail(INVALID_USAGE, "a send to self outside a group");
		if (npending == MAX_PENDING) return fail(INTERNAL, "too many pending self transfers");
		pending[npending++] = (struct pending){send, buf, count * type_size(type)};
	}
	return SUCCESS;
}

ncclResult_t ncclSend(const void *buf, size_t count, int type, int peer, struct comm *c, void *stream) {
	(void)stream;
	return p2p(1, buf, count, type, peer, c);
}

ncclResult_t ncclRecv(void *buf, size_t count, int type, int peer, struct comm *c, void *stream) {
	(void)stream;
	return p2p(0, buf, count, type, peer, c);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, int type, struct comm *c, void *stream) {
	(void)stream;
	if (!valid(c)) return fail(INVALID_ARGUMENT, "invalid communicator");
	if (type_size(type) == 0) return fail(INVALID_ARGUMENT, "invalid data type");
	if (count > 0 && (send == NULL || recv == NULL)) return fail(INVALID_ARGUMENT, "buffer is NULL");
	allgathers++;
	if (c->nranks == 1) memmove(recv, send, count * type_size(type));
	return SUCCESS;
}

// fakenccl_last_init copies the arguments of the latest
// ncclCommInitRankConfig: the id's 128 bytes, nranks, rank and the
// config's blocking field (-1 without a config).
void fakenccl_last_init(unsigned char *id, int *nranks, int *rank, int *blocking) {
	pthread_mutex_lock(&mu);
	memcpy(id, last_id.internal, 128);
	*nranks = last_nranks;
	*rank = last_rank;
	*blocking = last_blocking;
	pthread_mutex_unlock(&mu);
}

// fakenccl_counts reports live communicators, aborts, sends, receives and
// all-gathers so far.
void fakenccl_counts(long *out) {
	pthread_mutex_lock(&mu);
	out[0] = live_comms, out[1] = aborts, out[2] = sends, out[3] = recvs, out[4] = allgathers;
	pthread_mutex_unlock(&mu);
}
