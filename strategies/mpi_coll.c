#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "mpi_coll.h"

enum { TAG_NOTICE = 7001, TAG_ABORT, TAG_RING = 7200 /* + the part's index */ };

static int started;
static MPI_Comm abort_comm = MPI_COMM_NULL; /* the abort notices, apart from every other message */
static int watch_first, watch_n, watch_tag; /* the ranks told of this rank's long waits */
static volatile sig_atomic_t continued;     /* SIGCONTs received: stopped, then continued */

static void on_sigcont(int sig)
{
	(void)sig;
	continued++;
}

static int env_set(const char *name)
{
	const char *v = getenv(name);
	return v && *v;
}

int dt_mpi_launched(void)
{
	/*
	 * A launcher to talk to, not just a world size (tests and users may set
	 * OMPI_COMM_WORLD_SIZE by hand): Open MPI's mpirun (ORTE or PRRTE/PMIx),
	 * or srun with PMI or PMIx and more than one task.
	 */
	const char *tasks = getenv("SLURM_NTASKS");
	if (env_set("OMPI_MCA_orte_hnp_uri") || env_set("PMIX_NAMESPACE") || env_set("PMIX_SERVER_URI2") ||
	    env_set("PMIX_SERVER_URI21") || env_set("PMIX_SERVER_URI3"))
		return 1;
	return env_set("SLURM_STEP_ID") && (env_set("PMI_FD") || env_set("PMI_PORT") || env_set("PMIX_RANK")) &&
	       tasks && atoi(tasks) > 1;
}

int dt_mpi_start(int *rank, int *world)
{
	int provided, flag;
	MPI_Initialized(&flag);
	if (!flag) {
		if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
			return dt_error("MPI_Init failed: is this process started by mpirun or srun?");
		started = 1;
		/* Errors come back as codes (and a dead peer ends the job through mpirun). */
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	}
	if (abort_comm == MPI_COMM_NULL) {
		struct sigaction sa;
		MPI_Comm_dup(MPI_COMM_WORLD, &abort_comm);
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigcont;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		sigaction(SIGCONT, &sa, NULL);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, world);
	if (*world > 1)
		dt_error_set_rank(*rank);
	return 0;
}

void dt_mpi_stop(void)
{
	int flag = 0;
	if (!started)
		return;
	MPI_Finalized(&flag);
	if (!flag) {
		if (abort_comm != MPI_COMM_NULL)
			MPI_Comm_free(&abort_comm);
		MPI_Finalize();
	}
	started = 0;
}

/* Tells every other rank that this one aborts the job (empty messages; eager sends complete at once). */
static void tell_abort(void)
{
	MPI_Request *reqs;
	double start = dt_mpi_now();
	int world, rank, done = 0;

	if (abort_comm == MPI_COMM_NULL)
		return;
	MPI_Comm_size(abort_comm, &world);
	MPI_Comm_rank(abort_comm, &rank);
	reqs = calloc((size_t)world, sizeof(*reqs));
	if (!reqs)
		return;
	for (int i = 0; i < world; i++) {
		reqs[i] = MPI_REQUEST_NULL;
		if (i != rank)
			MPI_Isend(NULL, 0, MPI_BYTE, i, TAG_ABORT, abort_comm, &reqs[i]);
	}
	while (!done && dt_mpi_now() - start < 0.5) {
		MPI_Testall(world, reqs, &done, MPI_STATUSES_IGNORE);
		dt_mpi_backoff(1);
	}
	free(reqs);
}

/* Whether another rank has aborted the job; a probe only sees what came before it: 0.2 s of probes. */
static void check_abort_settled(void)
{
	double start = dt_mpi_now();
	if (abort_comm == MPI_COMM_NULL)
		return;
	while (dt_mpi_now() - start < 0.2) {
		dt_mpi_check_abort();
		dt_mpi_backoff(1);
	}
}

static _Noreturn void abort_job(int status, const char *fmt, va_list ap)
{
	char msg[1024];
	/* A rank continued after a stop finds here that the others gave up on it. */
	check_abort_settled();
	vsnprintf(msg, sizeof(msg), fmt, ap);
	dt_error("%s", msg);
	fflush(stderr);
	fflush(stdout);
	tell_abort();
	MPI_Abort(MPI_COMM_WORLD, status);
	_exit(status);
}

_Noreturn void dt_mpi_abort(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	abort_job(1, fmt, ap);
}

_Noreturn void dt_mpi_abort_status(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	abort_job(status, fmt, ap);
}

void dt_mpi_check_abort(void)
{
	int flag = 0;
	if (abort_comm == MPI_COMM_NULL)
		return;
	MPI_Iprobe(MPI_ANY_SOURCE, TAG_ABORT, abort_comm, &flag, MPI_STATUS_IGNORE);
	if (!flag)
		return;
	/*
	 * Another rank named the cause and is ending the job: leave without a
	 * word, after mpirun has taken in that rank's MPI_Abort (an exit before
	 * it would be reported as the cause). Its SIGTERM ends this rank.
	 */
	fflush(stdout);
	fflush(stderr);
	signal(SIGTERM, SIG_DFL);
	sleep(5);
	_exit(1);
}

void dt_mpi_watch(int first, int n, int tag)
{
	watch_first = first;
	watch_n = n;
	watch_tag = tag;
}

/* "Alive, waiting" to the ranks that watch this one (never waited for: eager, empty). */
static void tell_watchers(void)
{
	for (int i = 0; i < watch_n; i++) {
		MPI_Request r;
		MPI_Isend(NULL, 0, MPI_BYTE, watch_first + i, watch_tag, MPI_COMM_WORLD, &r);
		MPI_Request_free(&r);
	}
}

int dt_mpi_stops(void)
{
	return continued;
}

double dt_mpi_grace(double timeout)
{
	return timeout < 20 ? timeout / 2 : 10;
}

const char *dt_mpi_host(void)
{
	static char host[256];
	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "unknown");
	return host;
}

double dt_mpi_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Spins for a few milliseconds, then sleeps between polls (cores may be shared). */
void dt_mpi_backoff(double waited)
{
	if (waited > 0.002) {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

void dt_mpi_group_init(struct dt_mpi_group *g, MPI_Comm comm, double timeout, const char *who)
{
	MPI_Group world, mine;
	int *ranks;

	memset(g, 0, sizeof(*g));
	g->comm = comm;
	g->timeout = timeout;
	g->who = who;
	MPI_Comm_rank(comm, &g->rank);
	MPI_Comm_size(comm, &g->size);
	g->world_ranks = dt_calloc(g->size, sizeof(int));
	ranks = dt_calloc(g->size, sizeof(int));
	for (int i = 0; i < g->size; i++)
		ranks[i] = i;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Comm_group(comm, &mine);
	MPI_Group_translate_ranks(mine, g->size, ranks, world, g->world_ranks);
	MPI_Group_free(&world);
	MPI_Group_free(&mine);
	free(ranks);
	if (g->rank == 0) {
		g->arrived = dt_calloc(g->size, sizeof(int64_t));
		g->notice_buf = dt_calloc(g->size, sizeof(int64_t));
		g->notice_req = dt_calloc(g->size, sizeof(MPI_Request));
		g->heard = dt_calloc(g->size, sizeof(double));
		g->notice_req[0] = MPI_REQUEST_NULL;
		for (int i = 1; i < g->size; i++)
			MPI_Irecv(&g->notice_buf[i], 1, MPI_INT64_T, i, TAG_NOTICE, comm, &g->notice_req[i]);
	}
}

/* Rank 0: takes in the notices that have come, and posts the next receives. */
static void poll_notices(struct dt_mpi_group *g)
{
	int done = 1;
	while (done) {
		int index;
		MPI_Status st;
		MPI_Testany(g->size, g->notice_req, &index, &done, &st);
		if (!done || index == MPI_UNDEFINED)
			return;
		g->arrived[index] = g->notice_buf[index];
		g->heard[index] = dt_mpi_now();
		MPI_Irecv(&g->notice_buf[index], 1, MPI_INT64_T, index, TAG_NOTICE, g->comm, &g->notice_req[index]);
	}
}

/* Sends "at collective g->seq" to rank 0 (never waited for: eager, small). */
static void send_notice(struct dt_mpi_group *g)
{
	MPI_Request r;
	int64_t *slot = &g->notice_ring[g->nsent++ % 64];
	*slot = g->seq;
	MPI_Isend(slot, 1, MPI_INT64_T, 0, TAG_NOTICE, g->comm, &r);
	MPI_Request_free(&r);
}

/* Announces to rank 0 that this rank entered collective g->seq. */
static void notice(struct dt_mpi_group *g)
{
	g->seq++;
	if (g->size == 1)
		return;
	if (g->rank == 0) {
		g->arrived[0] = g->seq;
		poll_notices(g);
		return;
	}
	send_notice(g);
}

static void step_text(char *buf, size_t size, int64_t step)
{
	if (step >= 0)
		snprintf(buf, size, " at step %lld", (long long)step);
	else
		buf[0] = '\0';
}

/* The requests a wait is for; whether they are through (a poll of wait_group). */
struct reqs {
	MPI_Request *req;
	int n;
};

static int reqs_through(struct dt_mpi_group *g, void *ctx)
{
	struct reqs *q = ctx;
	int done = 0;
	(void)g;
	MPI_Testall(q->n, q->req, &done, MPI_STATUSES_IGNORE);
	return done;
}

/* Polls through(g, ctx) until it is 1, watched against the group's deadline. */
static void wait_group(struct dt_mpi_group *g, int (*through)(struct dt_mpi_group *g, void *ctx), void *ctx,
		       const char *what, int64_t step)
{
	/*
	 * Rank 0 names the missing ranks (after g->grace, an observer's turn);
	 * rank 1 names rank 0 when it did not; the others wait longer still.
	 */
	double limit = g->timeout + g->grace + (g->rank < 2 ? g->rank : 2) * dt_mpi_grace(g->timeout);
	double start = dt_mpi_now(), waited = 0, beat = g->timeout / 4;
	char at[48], missing[256], silent[256];
	int len = 0, slen = 0, nmissing = 0, nsilent = 0, stops = dt_mpi_stops();

	for (;;) {
		if (through(g, ctx))
			return;
		if (dt_mpi_stops() != stops) {
			/* This rank was stopped: the time it lost is its own, not the others' (they name it). */
			stops = dt_mpi_stops();
			start = dt_mpi_now();
			beat = g->timeout / 4;
		}
		waited = dt_mpi_now() - start;
		if (g->rank == 0)
			poll_notices(g);
		if (waited > beat) {
			/* A long wait: tell rank 0 (and the watchers) this rank is alive, waiting in this collective. */
			if (g->rank != 0)
				send_notice(g);
			tell_watchers();
			beat += g->timeout / 4;
		}
		if (waited > 0.002)
			dt_mpi_check_abort();
		if (waited > limit)
			break;
		dt_mpi_backoff(waited);
	}
	step_text(at, sizeof(at), step);
	if (g->rank != 0)
		dt_mpi_abort("%s: %s%s timed out after %g s (distribute.timeout); rank %d (the chief) did not "
			     "name the missing ranks, so it may be the one missing; aborting the job",
			     g->who, what, at, g->timeout, g->world_ranks[0]);
	missing[0] = silent[0] = '\0';
	for (int i = 1; i < g->size; i++) {
		if (g->arrived[i] < g->seq) {
			nmissing++;
			if (len < (int)sizeof(missing) - 16)
				len += snprintf(missing + len, sizeof(missing) - len, "%s%d", len ? ", " : "", g->world_ranks[i]);
		} else if (dt_mpi_now() - g->heard[i] > g->timeout / 2) {
			/* It entered, but sent no sign of life since: stopped inside the collective. */
			nsilent++;
			if (slen < (int)sizeof(silent) - 16)
				slen += snprintf(silent + slen, sizeof(silent) - slen, "%s%d", slen ? ", " : "", g->world_ranks[i]);
		}
	}
	if (nmissing || nsilent)
		dt_mpi_abort("%s: %s%s timed out after %g s (distribute.timeout): %s%s%s%s%s%s%s; aborting the job",
			     g->who, what, at, g->timeout, nmissing ? (nmissing > 1 ? "ranks " : "rank ") : "", missing,
			     nmissing ? " did not arrive (dead, stopped or stuck)" : "", nmissing && nsilent ? ", " : "",
			     nsilent ? (nsilent > 1 ? "ranks " : "rank ") : "", silent,
			     nsilent ? " stopped responding inside it (dead, stopped or stuck)" : "");
	dt_mpi_abort("%s: %s%s timed out after %g s (distribute.timeout): every rank arrived but the "
		     "exchange did not finish (network?); aborting the job",
		     g->who, what, at, g->timeout);
}

void dt_mpi_leave_stopped(struct dt_mpi_group *g)
{
	double v = 0;
	fflush(stdout);
	dt_mpi_allreduce_max(g, &v, 1, "the last meeting after a stop", -1);
}

void dt_mpi_group_release(struct dt_mpi_group *g)
{
	if (g->rank == 0 && g->notice_req) {
		double start = dt_mpi_now();
		/* Notices of the last collectives may still be on their way. */
		for (int i = 1; i < g->size; i++) {
			while (g->arrived[i] < g->seq && dt_mpi_now() - start < 1.0) {
				poll_notices(g);
				dt_mpi_backoff(1);
			}
			MPI_Cancel(&g->notice_req[i]);
			MPI_Wait(&g->notice_req[i], MPI_STATUS_IGNORE);
		}
	}
	free(g->arrived);
	free(g->notice_buf);
	free(g->notice_req);
	free(g->heard);
	free(g->world_ranks);
	memset(g, 0, sizeof(*g));
}

/* An in-place all-reduce of n values of `type` with `op` over the group, watched like every exchange. */
static void allreduce(struct dt_mpi_group *g, void *v, int64_t n, MPI_Datatype type, MPI_Op op, const char *what,
		      int64_t step)
{
	MPI_Request r;
	if (g->size == 1)
		return;
	DT_ASSERT(n <= 0x7fffffff);
	notice(g);
	MPI_Iallreduce(MPI_IN_PLACE, v, (int)n, type, op, g->comm, &r);
	wait_group(g, reqs_through, &(struct reqs){ &r, 1 }, what, step);
}

/* Chunk c of n floats cut in `size`: [lo(c), lo(c + 1)). */
static int64_t chunk_lo(int64_t n, int size, int c)
{
	return n * c / size;
}

int64_t dt_mpi_ring_chunk(const struct dt_mpi_group *g, int64_t n)
{
	return (n + g->size - 1) / g->size;
}

/*
 * The chunks of r's step: the one sent to the next member and the one
 * received from the previous. Reduce-scatter step k sends chunk rank - k
 * (summed over k + 1 members by then) and receives chunk rank - k - 1;
 * all-gather step k sends rank + 1 - k (summed over all) and receives
 * rank - k.
 */
static void ring_chunks(const struct dt_mpi_group *g, const struct dt_mpi_ring *r, int *send, int *recv)
{
	int p = g->size, k = r->step < p - 1 ? r->step : r->step - (p - 1);
	*send = ((g->rank - k + (r->step < p - 1 ? 0 : 1)) % p + p) % p;
	*recv = (*send - 1 + p) % p;
}

static void ring_post(struct dt_mpi_group *g, struct dt_mpi_ring *r)
{
	int p = g->size, send, recv;
	int64_t slo, shi, rlo, rhi;
	ring_chunks(g, r, &send, &recv);
	slo = chunk_lo(r->n, p, send);
	shi = chunk_lo(r->n, p, send + 1);
	rlo = chunk_lo(r->n, p, recv);
	rhi = chunk_lo(r->n, p, recv + 1);
	MPI_Irecv(r->step < p - 1 ? r->tmp : r->v + rlo, (int)(rhi - rlo), MPI_FLOAT, (g->rank - 1 + p) % p, r->tag,
		  g->comm, &r->req[1]);
	MPI_Isend(r->v + slo, (int)(shi - slo), MPI_FLOAT, (g->rank + 1) % p, r->tag, g->comm, &r->req[0]);
}

/* Takes r's steps whose messages are through: adds a received chunk, posts the next step. 1 when r is done. */
static int ring_advance(struct dt_mpi_group *g, struct dt_mpi_ring *r)
{
	int p = g->size, done = 0;
	while (r->step < 2 * (p - 1)) {
		MPI_Testall(2, r->req, &done, MPI_STATUSES_IGNORE);
		if (!done)
			return 0;
		if (r->step < p - 1) {
			int send, recv;
			int64_t lo, hi;
			float *v = r->v;
			const float *t = r->tmp;
			ring_chunks(g, r, &send, &recv);
			lo = chunk_lo(r->n, p, recv);
			hi = chunk_lo(r->n, p, recv + 1);
#pragma omp simd
			for (int64_t i = lo; i < hi; i++)
				v[i] += t[i - lo];
		}
		if (++r->step < 2 * (p - 1))
			ring_post(g, r);
	}
	return 1;
}

void dt_mpi_ring_start(struct dt_mpi_group *g, struct dt_mpi_ring *r, int index, float *v, int64_t n, float *tmp)
{
	int *tag_ub, flag = 0;
	memset(r, 0, sizeof(*r));
	r->v = v;
	r->tmp = tmp;
	r->n = n;
	r->req[0] = r->req[1] = MPI_REQUEST_NULL;
	if (g->size == 1)
		return;
	MPI_Comm_get_attr(g->comm, MPI_TAG_UB, &tag_ub, &flag);
	DT_ASSERT(n <= 0x7fffffff && index >= 0 && (!flag || TAG_RING + index <= *tag_ub));
	r->tag = TAG_RING + index;
	notice(g);
	ring_post(g, r);
}

struct rings {
	struct dt_mpi_ring *r;
	int n;
};

static int rings_through(struct dt_mpi_group *g, void *ctx)
{
	struct rings *q = ctx;
	int done = 1;
	for (int i = 0; i < q->n; i++)
		done &= ring_advance(g, &q->r[i]);
	return done;
}

void dt_mpi_ring_progress(struct dt_mpi_group *g, struct dt_mpi_ring *rings, int n)
{
	rings_through(g, &(struct rings){ rings, n });
}

void dt_mpi_ring_wait(struct dt_mpi_group *g, struct dt_mpi_ring *rings, int n, const char *what, int64_t step)
{
	if (g->size > 1 && n > 0)
		wait_group(g, rings_through, &(struct rings){ rings, n }, what, step);
}

void dt_mpi_allreduce_double(struct dt_mpi_group *g, double *v, int n, const char *what, int64_t step)
{
	allreduce(g, v, n, MPI_DOUBLE, MPI_SUM, what, step);
}

void dt_mpi_allreduce_max(struct dt_mpi_group *g, double *v, int n, const char *what, int64_t step)
{
	allreduce(g, v, n, MPI_DOUBLE, MPI_MAX, what, step);
}

void dt_mpi_bcast(struct dt_mpi_group *g, void *buf, int64_t bytes, const char *what, int64_t step)
{
	MPI_Request r;
	if (g->size == 1)
		return;
	DT_ASSERT(bytes <= 0x7fffffff);
	notice(g);
	MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, g->comm, &r);
	wait_group(g, reqs_through, &(struct reqs){ &r, 1 }, what, step);
}

char *dt_mpi_bcast_text(struct dt_mpi_group *g, const char *text, const char *what)
{
	int64_t n = (int64_t)strlen(text) + 1;
	char *copy;
	dt_mpi_bcast(g, &n, sizeof(n), what, -1);
	copy = dt_malloc((size_t)n);
	if (g->rank == 0)
		memcpy(copy, text, (size_t)n);
	dt_mpi_bcast(g, copy, n, what, -1);
	copy[n - 1] = '\0';
	return copy;
}

void dt_mpi_wait_all(MPI_Request *reqs, int n, double timeout, double grace, const char *who, const char *what,
		     const char *peer)
{
	double start = dt_mpi_now(), waited, beat = timeout / 4;
	int done = 0, stops = dt_mpi_stops();
	for (;;) {
		MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
		if (done)
			return;
		if (dt_mpi_stops() != stops) {
			stops = dt_mpi_stops();
			start = dt_mpi_now();
			beat = timeout / 4;
		}
		waited = dt_mpi_now() - start;
		if (waited > beat) {
			tell_watchers();
			beat += timeout / 4;
		}
		if (waited > 0.002)
			dt_mpi_check_abort();
		if (waited > timeout + grace)
			break;
		dt_mpi_backoff(waited);
	}
	dt_mpi_abort("%s: %s timed out after %g s (distribute.timeout) waiting for %s (dead, stopped or stuck); "
		     "aborting the job", who, what, timeout, peer);
}
