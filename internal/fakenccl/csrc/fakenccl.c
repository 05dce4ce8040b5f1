// A stub NCCL for the tests of internal/nccl and a2a: it exports the entry
// points the binding binds, checks their arguments about as NCCL does, and
// moves bytes on host memory: its "device" pointers are host pointers (the
// stub CUDA driver's are too).
//
// Point-to-point: communicators made from the same unique id and rank
// count form a group, within one process. A send from rank a to b and a
// receive on b from a are paired in the order each side posted them per
// (sender, receiver) pair, and the bytes are copied when the second half
// arrives. An operation is posted at the outermost ncclGroupEnd of the
// calling thread (group state is per thread, as in NCCL), or at once
// outside a group. A half whose partner has not come is queued: a
// single-threaded test can enqueue rank 0's group, then rank 1's, and the
// copies happen during rank 1's. Meanwhile ncclCommGetAsyncError reports
// ncclInProgress for a communicator with queued halves: the stub's stand-in
// for work still running on the stream. What it does not model: streams.
// The copy happens on the host when the pair is complete, not in stream
// order, so device work enqueued after the group (an unpack of a received
// staging buffer) sees the bytes only if the pair was complete before it
// was enqueued. FAKENCCL_P2P_WAIT_MS=N makes ncclGroupEnd (and an
// operation outside a group) wait up to N ms for its halves' partners
// before returning, which gives that order to ranks that enqueue from
// threads of their own; past N it returns with them still queued.
// FAKENCCL_P2P_HANG=1 never pairs anything: every half stays queued (and
// its communicator in progress) until the communicator is aborted or
// destroyed, as with a peer that never comes. Sizes of a pair must match,
// or both communicators fail with ncclInvalidUsage.
//
// Blocking communicators (a config's blocking = 1; ncclCommSplit makes
// them too, color 0 and key = rank only; on a non-blocking parent, as in
// NCCL, newcomm stays NULL and the parent in progress until every rank
// has split, and newcomm is then written from another thread): as
// NCCL's blocking launch connects to a peer it has not yet
// exchanged with, ncclGroupEnd waits, with no bound, until each half on a
// blocking communicator to a peer it has never paired with has paired,
// or the communicator is released from another thread (then it fails);
// halves to peers already paired with queue as above.
//
// ncclAlltoAll is a group of sends and receives, one pair per rank, and
// pairs as they do. ncclMemAlloc is malloc; windows are registrations
// checked and counted (fakenccl_live). ncclAllGather moves bytes only in
// a world of one. Communicators made
// non-blocking report ncclInProgress for FAKENCCL_INIT_POLLS polls of
// ncclCommGetAsyncError (default 0), or forever with FAKENCCL_INIT_HANG=1
// until aborted. FAKENCCL_VERSION sets the version code (default 22809),
// FAKENCCL_INIT_ERROR makes ncclCommInitRankConfig fail with that result.
// fakenccl_last_init and fakenccl_counts report what tests check.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#define MAX_GROUPED 1024 // operations of one thread between ncclGroupStart and End
#define MAX_QUEUED 4096  // halves of the process waiting for their partner

struct comm {
	unsigned magic;
	int nranks, rank, blocking;
	long polls;  // ncclInProgress answers left; -1: until aborted
	ncclUniqueId id;
	int failed;  // a result the communicator failed with (a pair of another size)
	int joining; // made by ncclCommSplit: in progress until every rank has split
	struct comm **out;       // a non-blocking split's newcomm: written once every rank has split, NULL after
	struct comm *child;      // a non-blocking parent's split in progress (the parent reports ncclInProgress)
	unsigned long splits;    // ncclCommSplit calls on it so far
	unsigned char *connected; // per peer: a transfer with it has paired (a blocking group's first waits)
	struct comm *next;        // in all_comms; released ones stay (magic 0), never freed
};

// One half of a point-to-point transfer: c sends to or receives from peer.
struct op {
	int send;
	struct comm *c;
	int peer;
	void *buf;
	size_t bytes;
	unsigned long token; // the ncclGroupEnd (or call) that posted it
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_error[256];
static unsigned long id_counter;
static pthread_cond_t paired = PTHREAD_COND_INITIALIZER;
static __thread int group_depth;
static __thread struct op grouped[MAX_GROUPED];
static __thread int ngrouped;
static struct op queued[MAX_QUEUED]; // in posting order
static int nqueued;
static unsigned long tokens;
static long live_comms, aborts, sends, recvs, allgathers;
static long splits, live_blocking, blocking_sends; // ncclCommSplit calls, blocking communicators, sends on them
static struct comm *all_comms;
static ncclUniqueId last_id;
static int last_nranks = -1, last_rank = -1, last_blocking = -2;
static long last_config_size = -1, last_config_version = -1, last_cta_policy = -2;
static long mem_allocs, windows; // live ncclMemAlloc blocks and registered windows

// ncclConfig_t as NCCL 2.28 lays it out (flat: config_head would pad).
typedef struct {
	size_t size;
	unsigned magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
	int splitShare, trafficClass;
	const char *commName;
	int collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched;
} config_v22800;

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

static int queued_of(const struct comm *c);
static void publish(const struct comm *c);

// enlist counts a new communicator live; with mu.
static void enlist(struct comm *c) {
	c->next = all_comms;
	all_comms = c;
	live_comms++;
	live_blocking += c->blocking;
}

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
	last_config_size = config ? (long)config->size : -1;
	last_config_version = config ? (long)config->version : -1;
	last_cta_policy = -2;
	if (config && config->size >= sizeof(config_v22800) && config->version >= 22800)
		last_cta_policy = ((const config_v22800 *)config)->CTAPolicy;
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
	c->id = id;
	if ((c->connected = calloc((size_t)nranks, 1)) == NULL) {
		free(c);
		return fail(SYSTEM, "out of memory");
	}
	pthread_mutex_lock(&mu);
	enlist(c);
	pthread_mutex_unlock(&mu);
	*out = c;
	return !c->blocking && c->polls != 0 ? IN_PROGRESS : SUCCESS;
}

// all_joined reports whether every rank of c's group has a live
// communicator of c's id; with mu.
static int all_joined(const struct comm *c) {
	int n = 0;
	for (const struct comm *o = all_comms; o != NULL; o = o->next)
		if (valid(o) && o->nranks == c->nranks && memcmp(&o->id, &c->id, sizeof c->id) == 0) n++;
	return n == c->nranks;
}

// ncclCommSplit of color 0 and key = rank only (the same ranks, new
// choices): the child's id is derived from the parent's and its split
// count, so the ranks' children pair with each other. Like NCCL's, it
// refuses a parent with work in progress; on a non-blocking parent it
// returns ncclInProgress with *out NULL, the parent in progress until
// every rank has split and *out written then (by the last rank's
// thread; NCCL's init thread writes it as late); on a blocking one it
// waits for that (or a release) and returns the child.
ncclResult_t ncclCommSplit(struct comm *p, int color, int key, struct comm **out, config_head *config) {
	if (!valid(p) || out == NULL) return fail(INVALID_ARGUMENT, "invalid communicator or newcomm");
	if (config != NULL && (config->magic != CONFIG_MAGIC || config->size < sizeof(config_head) || config->version < 21400))
		return fail(INVALID_ARGUMENT, "config not initialized");
	if (color == -1) {
		*out = NULL;
		return SUCCESS;
	}
	if (color != 0 || key != p->rank) return fail(INVALID_USAGE, "the stub splits into color 0, key = rank only");
	struct comm *c = calloc(1, sizeof *c);
	unsigned char *connected = calloc((size_t)p->nranks, 1);
	if (c == NULL || connected == NULL) {
		free(c), free(connected);
		return fail(SYSTEM, "out of memory");
	}
	pthread_mutex_lock(&mu);
	if (p->polls != 0 || p->failed || p->child != NULL || queued_of(p)) {
		pthread_mutex_unlock(&mu);
		free(c), free(connected);
		return fail(INVALID_ARGUMENT, "Attempt to use communicator before the previous operation returned ncclSuccess");
	}
	splits++;
	c->magic = COMM_MAGIC;
	c->nranks = p->nranks;
	c->rank = p->rank;
	c->blocking = config ? config->blocking != 0 : 1;
	c->joining = 1;
	c->id = p->id;
	c->id.internal[126] ^= 0x5a;
	c->id.internal[127] ^= (unsigned char)++p->splits;
	c->connected = connected;
	enlist(c);
	pthread_cond_broadcast(&paired);
	if (p->blocking) {
		while (valid(c) && !all_joined(c)) pthread_cond_wait(&paired, &mu);
		pthread_mutex_unlock(&mu);
		*out = c;
		return SUCCESS;
	}
	*out = NULL; // as NCCL: the child appears only once its init is done
	c->out = out;
	p->child = c;
	if (all_joined(c)) publish(c);
	pthread_mutex_unlock(&mu);
	return IN_PROGRESS;
}

// publish writes each newcomm of c's group that is still pending, from
// the thread of the rank that split last (NCCL writes it from its own
// thread when the child's init ends, long after ncclCommSplit returned);
// with mu.
static void publish(const struct comm *c) {
	for (struct comm *o = all_comms; o != NULL; o = o->next)
		if (valid(o) && o->out != NULL && o->nranks == c->nranks && memcmp(&o->id, &c->id, sizeof c->id) == 0) {
			*o->out = o;
			o->out = NULL;
		}
}

// queued_of reports whether c has halves waiting for a partner; with mu.
static int queued_of(const struct comm *c) {
	for (int i = 0; i < nqueued; i++)
		if (queued[i].c == c) return 1;
	return 0;
}

// drop removes queued half i; with mu.
static void drop(int i) {
	memmove(&queued[i], &queued[i + 1], (size_t)(nqueued - i - 1) * sizeof queued[0]);
	nqueued--;
}

ncclResult_t ncclCommGetAsyncError(struct comm *c, ncclResult_t *r) {
	if (!valid(c) || r == NULL) return fail(INVALID_ARGUMENT, "invalid communicator");
	pthread_mutex_lock(&mu);
	if (c->polls > 0) c->polls--;
	if (c->joining && all_joined(c)) c->joining = 0;
	if (c->child != NULL && (!valid(c->child) || c->child->out == NULL)) c->child = NULL; // published or released
	if (c->failed) *r = c->failed;
	else *r = c->polls != 0 || c->joining || c->child != NULL || queued_of(c) ? IN_PROGRESS : SUCCESS;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

// release ends c, dropping its queued halves (an abort ends them; so does
// a destroy, which in NCCL would wait for them), and wakes a group blocked
// on it, which then fails.
static ncclResult_t release(struct comm *c, int abort) {
	pthread_mutex_lock(&mu);
	if (!valid(c)) {
		pthread_mutex_unlock(&mu);
		return fail(INVALID_ARGUMENT, "invalid communicator");
	}
	for (int i = nqueued - 1; i >= 0; i--)
		if (queued[i].c == c) drop(i);
	struct comm *k = c->child;
	if (k != NULL && valid(k) && k->out != NULL) { // as NCCL's abort: the split's init fails, and the failed child is written
		k->failed = INTERNAL;
		*k->out = k;
		k->out = NULL;
	}
	c->magic = 0; // kept: a group blocked on it looks at it when it wakes
	live_comms--;
	live_blocking -= c->blocking;
	aborts += abort;
	pthread_cond_broadcast(&paired);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

ncclResult_t ncclCommDestroy(struct comm *c) { return release(c, 0); }
ncclResult_t ncclCommAbort(struct comm *c) { return release(c, 1); }

ncclResult_t ncclGroupStart(void) {
	group_depth++;
	return SUCCESS;
}

// partners reports whether a and b are the two halves of one transfer.
static int partners(const struct op *a, const struct op *b) {
	return a->send != b->send && a->c->nranks == b->c->nranks && a->c->rank == b->peer && b->c->rank == a->peer &&
		memcmp(&a->c->id, &b->c->id, sizeof a->c->id) == 0;
}

// post pairs o with the oldest queued half that is its partner and copies,
// or queues it; with mu.
static ncclResult_t post(struct op o) {
	if (!env_long("FAKENCCL_P2P_HANG", 0)) {
		for (int i = 0; i < nqueued; i++) {
			struct op *q = &queued[i];
			if (!partners(&o, q)) continue;
			const struct op *s = o.send ? &o : q, *r = o.send ? q : &o;
			ncclResult_t res = SUCCESS;
			if (s->bytes != r->bytes) {
				o.c->failed = q->c->failed = INVALID_USAGE;
				res = fail(INVALID_USAGE, "a send and its receive differ in size");
			} else if (s->bytes > 0) {
				memmove(r->buf, s->buf, s->bytes);
			}
			s->c->connected[s->peer] = r->c->connected[r->peer] = 1;
			drop(i);
			pthread_cond_broadcast(&paired);
			return res;
		}
	}
	if (nqueued == MAX_QUEUED) return fail(INTERNAL, "too many transfers waiting for a partner");
	queued[nqueued++] = o;
	return SUCCESS;
}

// waiting reports whether a half posted under token is still queued; with mu.
static int waiting(unsigned long token) {
	for (int i = 0; i < nqueued; i++)
		if (queued[i].token == token) return 1;
	return 0;
}

// connecting reports whether a half posted under token waits on a
// blocking communicator for a peer it has not yet paired with (NCCL's
// blocking launch connects to a new peer before it returns); with mu.
// With FAKENCCL_BLOCKING_WAIT_ALL=1 it waits for every peer, as a launch
// that blocks for another reason would.
static int connecting(unsigned long token) {
	int all = (int)env_long("FAKENCCL_BLOCKING_WAIT_ALL", 0);
	for (int i = 0; i < nqueued; i++)
		if (queued[i].token == token && queued[i].c->blocking && (all || !queued[i].c->connected[queued[i].peer])) return 1;
	return 0;
}

// post_all posts n operations under one token and waits until no half of
// them on a blocking communicator waits for a new peer (for ever, unless
// the communicator is released: then it fails); with
// FAKENCCL_P2P_WAIT_MS, it also waits that long at most for the partners.
static ncclResult_t post_all(struct op *ops, int n) {
	ncclResult_t res = SUCCESS;
	pthread_mutex_lock(&mu);
	unsigned long token = ++tokens;
	for (int i = 0; i < n; i++) {
		ops[i].token = token;
		if (!valid(ops[i].c)) {
			res = fail(INVALID_ARGUMENT, "communicator released inside a group");
			continue;
		}
		ncclResult_t r = post(ops[i]);
		if (r != SUCCESS) res = r;
	}
	long ms = env_long("FAKENCCL_P2P_WAIT_MS", 0);
	if (ms > 0) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += ms / 1000;
		until.tv_nsec += (ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
		while (waiting(token))
			if (pthread_cond_timedwait(&paired, &mu, &until) != 0) break;
	}
	while (connecting(token)) pthread_cond_wait(&paired, &mu);
	for (int i = 0; i < n && res == SUCCESS; i++)
		if (!valid(ops[i].c)) res = fail(INTERNAL, "communicator aborted during the group");
	pthread_mutex_unlock(&mu);
	return res;
}

// group_end posts the thread's grouped operations at the outermost end.
static ncclResult_t group_end(void) {
	if (group_depth == 0) return fail(INVALID_USAGE, "ncclGroupEnd without ncclGroupStart");
	if (--group_depth > 0) return SUCCESS;
	int n = ngrouped;
	ngrouped = 0;
	return post_all(grouped, n);
}

ncclResult_t ncclGroupEnd(void) { return group_end(); }

static ncclResult_t p2p(int send, const void *buf, size_t count, int type, int peer, struct comm *c) {
	if (!valid(c)) return fail(INVALID_ARGUMENT, "invalid communicator");
	if (type_size(type) == 0) return fail(INVALID_ARGUMENT, "invalid data type");
	if (peer < 0 || peer >= c->nranks) return fail(INVALID_ARGUMENT, "peer out of range");
	if (count > 0 && buf == NULL) return fail(INVALID_ARGUMENT, "buffer is NULL");
	pthread_mutex_lock(&mu);
	if (send) sends++; else recvs++;
	if (send && c->blocking) blocking_sends++;
	pthread_mutex_unlock(&mu);
	struct op o = {send, c, peer, (void *)buf, count * type_size(type), 0};
	if (group_depth == 0) {
		if (peer == c->rank) return fail(INVALID_USAGE, "a send to self outside a group");
		return post_all(&o, 1);
	}
	if (ngrouped == MAX_GROUPED) return fail(INTERNAL, "too many operations in one group");
	grouped[ngrouped++] = o;
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
	pthread_mutex_lock(&mu);  // fakenccl_counts reads it under mu
	allgathers++;
	pthread_mutex_unlock(&mu);
	if (c->nranks == 1) memmove(recv, send, count * type_size(type));
	return SUCCESS;
}

// ncclAlltoAll is count elements to every rank, each a send and a receive
// of the calling thread's group (an implicit one outside a group), so it
// pairs across ranks as point-to-point transfers do.
ncclResult_t ncclAlltoAll(const void *send, void *recv, size_t count, int type, struct comm *c, void *stream) {
	(void)stream;
	if (!valid(c)) return fail(INVALID_ARGUMENT, "invalid communicator");
	size_t n = count * type_size(type);
	if (type_size(type) == 0) return fail(INVALID_ARGUMENT, "invalid data type");
	if (count > 0 && (send == NULL || recv == NULL)) return fail(INVALID_ARGUMENT, "buffer is NULL");
	// Static calls only: another copy of the stub loaded earlier in the
	// process would interpose its exported names.
	group_depth++;
	ncclResult_t res = SUCCESS;
	for (int p = 0; p < c->nranks && res == SUCCESS; p++) {
		res = p2p(1, (const char *)send + (size_t)p * n, count, type, p, c);
		if (res == SUCCESS) res = p2p(0, (char *)recv + (size_t)p * n, count, type, p, c);
	}
	ncclResult_t end = group_end();
	return res != SUCCESS ? res : end;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
	if (ptr == NULL || size == 0) return fail(INVALID_ARGUMENT, "ptr is NULL or size is 0");
	*ptr = malloc(size);
	if (*ptr == NULL) return fail(SYSTEM, "out of memory");
	pthread_mutex_lock(&mu);
	mem_allocs++;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

ncclResult_t ncclMemFree(void *ptr) {
	if (ptr == NULL) return SUCCESS;
	free(ptr);
	pthread_mutex_lock(&mu);
	mem_allocs--;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

#define WIN_MAGIC 0x77696e64u
struct window {
	unsigned magic;
	struct comm *c;
};

ncclResult_t ncclCommWindowRegister(struct comm *c, void *buf, size_t size, struct window **win, int flags) {
	if (!valid(c) || win == NULL) return fail(INVALID_ARGUMENT, "invalid communicator or window");
	if (buf == NULL || size == 0 || flags < 0 || flags > 1) return fail(INVALID_ARGUMENT, "invalid buffer, size or flags");
	struct window *w = calloc(1, sizeof *w);
	if (w == NULL) return fail(SYSTEM, "out of memory");
	w->magic = WIN_MAGIC;
	w->c = c;
	pthread_mutex_lock(&mu);
	windows++;
	pthread_mutex_unlock(&mu);
	*win = w;
	return SUCCESS;
}

ncclResult_t ncclCommWindowDeregister(struct comm *c, struct window *w) {
	if (!valid(c) || w == NULL || w->magic != WIN_MAGIC || w->c != c) return fail(INVALID_ARGUMENT, "invalid communicator or window");
	w->magic = 0;
	free(w);
	pthread_mutex_lock(&mu);
	windows--;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

// fakenccl_last_config reports the latest init's config: its size, its
// version (-1 without a config) and the CTA policy (-2 unless the config
// is a 2.28 one).
void fakenccl_last_config(long *out) {
	pthread_mutex_lock(&mu);
	out[0] = last_config_size, out[1] = last_config_version, out[2] = last_cta_policy;
	pthread_mutex_unlock(&mu);
}

// fakenccl_live reports the live ncclMemAlloc blocks and registered windows.
void fakenccl_live(long *out) {
	pthread_mutex_lock(&mu);
	out[0] = mem_allocs, out[1] = windows;
	pthread_mutex_unlock(&mu);
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

// fakenccl_counts reports live communicators, aborts, sends, receives,
// all-gathers so far, the halves waiting for a partner now, splits so
// far, live blocking communicators and sends on blocking ones so far.
void fakenccl_counts(long *out) {
	pthread_mutex_lock(&mu);
	out[0] = live_comms, out[1] = aborts, out[2] = sends, out[3] = recvs, out[4] = allgathers, out[5] = nqueued;
	out[6] = splits, out[7] = live_blocking, out[8] = blocking_sends;
	pthread_mutex_unlock(&mu);
}
