/*
 * parameter_server: asynchronous training (TF1's and tf.distribute's
 * ParameterServerStrategy, over MPI). The last num_ps ranks are servers, the
 * others workers; worker 0 is the chief.
 *
 * The trainable part of the flat parameter buffer is cut into num_ps shards
 * on parameter boundaries; server p holds shard p of the parameters and of
 * the optimizer slots. Each step a worker sends its gradient shards to the
 * servers and receives fresh parameter shards back; a server applies each
 * gradient as it arrives (its own optimizer step) and replies at once, so
 * workers never wait for each other. Staleness of an update is the number of
 * other workers' updates the shard took since this worker's previous one.
 *
 * Data: worker w computes slice w of each global batch (exactly once per
 * epoch over the workers); its gradient is its slice's mean (the global
 * batch's sum times the number of workers), as each TF worker's is. Metrics
 * are summed over the workers at the end of an epoch; then the chief gathers
 * the shards (parameters, slots, step count) so that its checkpoint holds the
 * whole state, and prints the epoch's staleness. Servers leave when every
 * worker has said it is done.
 *
 * A stalled rank is named once, by the rank that waits on it directly
 * (mpi_coll.h): a worker that waits in any exchange tells the servers it is
 * alive every timeout/4 s, so the first server names the worker it heard
 * nothing from for distribute.timeout (or the worker its reply is stuck on);
 * the workers wait dt_mpi_grace longer, on the servers and on each other,
 * and name a server only when the servers said nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "local.h"
#include "mpi_coll.h"

enum { TAG_PUSH = 7101, TAG_REPLY, TAG_DONE, TAG_GATHER, TAG_STATE, TAG_ALIVE };

struct ps {
	int workers, servers;      /* ranks [0, workers) train, [workers, world) serve */
	int is_server;
	int stopped;               /* (servers) the workers stopped on a signal: no MPI_Finalize */
	MPI_Comm worker_comm;      /* the workers (or the servers) */
	struct dt_mpi_group world_group, worker_group;
	int64_t *lo, *hi;          /* (servers) shard bounds in floats */
	int shards_ready;
	/* worker */
	char **reply;              /* (servers) header + shard floats */
	MPI_Request *reqs;         /* (2 * servers) */
	int64_t step;
	double stale_sum, stale_max, stale_n;  /* this epoch */
	char report[160];          /* the chief's staleness line, printed after the epoch's progress line */
	/* DTRAIN_STATS */
	double t_exchange;
};

struct reply_header {
	int64_t version;   /* updates the shard has taken */
	int64_t stale;     /* other workers' updates since this worker's previous one */
};

static const char who[] = "parameter_server";

static const char *workers_word(int n) { return n == 1 ? "worker" : "workers"; }

/* The job must hold num_ps servers and at least one worker. 0 or -1. */
static int check_world(int num_ps, int world)
{
	if (world < num_ps + 1)
		return dt_error("strategy 'parameter_server' with num_ps %d needs at least %d processes (mpirun -np %d), "
				"but the job has %d", num_ps, num_ps + 1, num_ps + 1, world);
	return 0;
}

static int ps_check(const struct dt_distribute *d, const struct dt_system *sys)
{
	if (d->ndevices > 1 || (d->ndevices == 1 && (d->devices[0].index != 0 || d->devices[0].kind != DT_DEVICE_CPU)))
		return dt_node_error(d->devices_node, "parameter_server has one replica per worker: devices is [cpu:0] or auto");
	return sys ? check_world(d->num_ps, sys->mpi_world) : 0;
}

static int ps_init(struct dt_strategy *s, const struct dt_node *args)
{
	struct dt_distribute d;
	struct ps *p;

	if (dt_distribute_read(args, &d) < 0)
		return -1;
	s->timeout = d.timeout;
	/* The world MPI reports, which the environment's count (ps_check) only announced. */
	if (dt_strategy_join_world(s, who) < 0 || check_world(d.num_ps, s->world) < 0)
		return -1;
	p = dt_calloc(1, sizeof(*p));
	s->priv = p;
	p->servers = d.num_ps;
	p->workers = s->world - d.num_ps;
	p->is_server = s->rank >= p->workers;
	s->nreplicas = 1;
	s->devices[0] = DT_CPU;
	s->is_chief = s->rank == 0;
	s->first_replica = p->is_server ? 0 : s->rank;
	s->global_replicas = p->workers;
	dt_mpi_group_init(&p->world_group, MPI_COMM_WORLD, s->timeout, who);
	if (dt_strategy_same_job(s, &p->world_group) < 0)
		return -1;
	MPI_Comm_split(MPI_COMM_WORLD, p->is_server, s->rank, &p->worker_comm);
	dt_mpi_group_init(&p->worker_group, p->worker_comm, s->timeout, who);
	if (!p->is_server) {
		/* The servers watch the workers and name a stalled one first. */
		p->worker_group.grace = 2 * dt_mpi_grace(s->timeout);
		dt_mpi_watch(p->workers, p->servers, TAG_ALIVE);
	}
	p->lo = dt_calloc(p->servers, sizeof(int64_t));
	p->hi = dt_calloc(p->servers, sizeof(int64_t));
	return 0;
}

/* Shard bounds on parameter boundaries: each trainable tensor goes to the server its middle falls in. */
static void make_shards(struct ps *p, const struct dt_model *m)
{
	int64_t n = m->ntrainable;
	for (int k = 0; k < p->servers; k++)
		p->lo[k] = p->hi[k] = -1;
	for (int i = 0; i < m->nlayers; i++) {
		for (int j = 0; j < m->layers[i].nparams; j++) {
			const struct dt_param *pr = &m->layers[i].params[j];
			int64_t c = dt_shape_count(&pr->shape);
			int k;
			if (!pr->trainable)
				continue;
			k = (int)((pr->offset + c / 2) * p->servers / (n > 0 ? n : 1));
			k = k < p->servers ? k : p->servers - 1;
			if (p->lo[k] < 0 || pr->offset < p->lo[k])
				p->lo[k] = pr->offset;
			if (pr->offset + c > p->hi[k])
				p->hi[k] = pr->offset + c;
		}
	}
	for (int k = 0; k < p->servers; k++)
		if (p->lo[k] < 0)
			p->lo[k] = p->hi[k] = 0;
	if (!p->is_server) {
		p->reply = dt_calloc(p->servers, sizeof(char *));
		p->reqs = dt_calloc(2 * (size_t)p->servers, sizeof(MPI_Request));
		for (int k = 0; k < p->servers; k++)
			p->reply[k] = dt_malloc(sizeof(struct reply_header) + (size_t)(p->hi[k] - p->lo[k]) * sizeof(float));
	}
	p->shards_ready = 1;
}

static void ps_broadcast(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct ps *p = s->priv;
	struct dt_model *m = &replicas[0];
	if (!p->shards_ready)
		make_shards(p, m);
	dt_mpi_bcast(&p->world_group, m->params, m->nparams * (int64_t)sizeof(float), "the parameter broadcast", -1);
	for (int i = 0; opts && i < opts[0].nslots; i++)
		if (opts[0].slots[i])
			dt_mpi_bcast(&p->world_group, opts[0].slots[i], m->ntrainable * (int64_t)sizeof(float),
				     "the optimizer-state broadcast", -1);
	if (opts)
		dt_mpi_bcast(&p->world_group, &opts[0].iterations, sizeof(opts[0].iterations),
			     "the optimizer-state broadcast", -1);
}

static void server_rank_text(const struct ps *p, int k, char *buf, size_t size)
{
	snprintf(buf, size, "server rank %d", p->workers + k);
}

/* A worker's step: push the gradient shards, pull the parameter shards. */
static void ps_apply(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct ps *p = s->priv;
	struct dt_model *m = &replicas[0];
	struct dt_tensor g = dt_model_grads(m);
	struct timespec t0, t1;
	int nreq = 0;
	char peer[64];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* The trainer scales by 1/global batch: times the workers, the slice's mean. */
	dt_op_scale(&g, (float)p->workers);
	for (int k = 0; k < p->servers; k++) {
		int64_t n = p->hi[k] - p->lo[k];
		if (n == 0)
			continue;
		MPI_Irecv(p->reply[k], (int)(sizeof(struct reply_header) + n * sizeof(float)), MPI_BYTE, p->workers + k,
			  TAG_REPLY, MPI_COMM_WORLD, &p->reqs[nreq++]);
		MPI_Isend(m->grads + p->lo[k], (int)(n * sizeof(float)), MPI_BYTE, p->workers + k, TAG_PUSH,
			  MPI_COMM_WORLD, &p->reqs[nreq++]);
	}
	server_rank_text(p, 0, peer, sizeof(peer));
	if (p->servers > 1)
		snprintf(peer, sizeof(peer), "server ranks %d..%d", p->workers, p->workers + p->servers - 1);
	dt_mpi_wait_all(p->reqs, nreq, s->timeout, dt_mpi_grace(s->timeout), who,
			"a worker's gradient push and parameter pull", peer);
	for (int k = 0; k < p->servers; k++) {
		int64_t n = p->hi[k] - p->lo[k];
		struct reply_header h;
		if (n == 0)
			continue;
		memcpy(&h, p->reply[k], sizeof(h));
		memcpy(m->params + p->lo[k], p->reply[k] + sizeof(h), (size_t)n * sizeof(float));
		p->stale_sum += (double)h.stale;
		p->stale_n += 1;
		if ((double)h.stale > p->stale_max)
			p->stale_max = (double)h.stale;
		opts[0].iterations = h.version;
	}
	p->step++;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	p->t_exchange += (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

/*
 * A server: aborts the job naming the workers not gone that sent nothing for
 * limit seconds (a message that came but is not taken in yet counts).
 */
static void check_workers(const struct dt_strategy *s, double *heard, const char *gone, double limit)
{
	const struct ps *p = s->priv;
	char names[256];
	int len = 0, n = 0;
	double now = dt_mpi_now();

	for (int w = 0; w < p->workers; w++) {
		int pending = 0;
		if (gone[w] || now - heard[w] <= limit)
			continue;
		MPI_Iprobe(w, MPI_ANY_TAG, MPI_COMM_WORLD, &pending, MPI_STATUS_IGNORE);
		if (pending) {
			heard[w] = now;
			continue;
		}
		n++;
		if (len < (int)sizeof(names) - 16)
			len += snprintf(names + len, sizeof(names) - len, "%s%d", len ? ", " : "", w);
	}
	if (n)
		dt_mpi_abort("%s: server rank %d timed out after %g s (distribute.timeout) waiting for worker %s %s, "
			     "which sent nothing (dead, stopped or stuck); aborting the job", who, s->rank, s->timeout,
			     n > 1 ? "ranks" : "rank", names);
}

/*
 * A server: the next message from a worker into in (size bytes), its status
 * in st. Every message, an "alive" one too, dates its worker in heard; the
 * workers are checked while it waits and after each message (a stream of
 * pushes from some workers must not hide a silent one).
 */
static void next_message(const struct dt_strategy *s, char *in, size_t size, double *heard, const char *gone,
			 double limit, MPI_Status *st)
{
	const struct ps *p = s->priv;
	MPI_Request r;
	double start = dt_mpi_now(), now;
	int flag = 0, stops = dt_mpi_stops();

	MPI_Irecv(in, (int)size, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r);
	for (;;) {
		MPI_Test(&r, &flag, st);
		if (flag)
			break;
		now = dt_mpi_now();
		if (dt_mpi_stops() != stops) {
			/* This server was stopped: the workers' silence meanwhile is not theirs. */
			stops = dt_mpi_stops();
			for (int w = 0; w < p->workers; w++)
				heard[w] = now;
		}
		if (now - start > 0.002)
			dt_mpi_check_abort();
		check_workers(s, heard, gone, limit);
		dt_mpi_backoff(now - start);
	}
	heard[st->MPI_SOURCE] = dt_mpi_now();
	check_workers(s, heard, gone, limit);
}

/* A server's whole job: apply pushes, answer gathers, until every worker is done. */
static int ps_serve(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct ps *p = s->priv;
	struct dt_model *m = &replicas[0];
	struct dt_optimizer *o = &opts[0];
	int k = s->rank - p->workers, done = 0;
	int64_t lo, hi, n, version = 0, *last;
	size_t shard;
	char *in, *out, *gone, peer[64];
	double *heard, limit;

	if (!p->is_server)
		return 0;
	lo = p->lo[k];
	hi = p->hi[k];
	n = hi - lo;
	shard = (size_t)n * sizeof(float);
	last = dt_calloc(p->workers, sizeof(int64_t));
	in = dt_malloc(shard + 1);
	out = dt_malloc(sizeof(struct reply_header) + (1 + DT_OPT_MAX_SLOTS) * shard);
	gone = dt_calloc(p->workers, 1);
	heard = dt_calloc(p->workers, sizeof(double));
	for (int w = 0; w < p->workers; w++)
		heard[w] = dt_mpi_now();
	/* The first server names a stalled worker; the others give it time to. */
	limit = s->timeout + (k > 0 ? dt_mpi_grace(s->timeout) : 0);
	while (done < p->workers) {
		MPI_Request r;
		MPI_Status st;
		struct reply_header h = { 0, 0 };
		size_t len = sizeof(h);
		int count;

		next_message(s, in, shard + 1, heard, gone, limit, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		switch (st.MPI_TAG) {
		case TAG_ALIVE: /* a worker waiting in an exchange */
			continue;
		case TAG_PUSH:
			DT_ASSERT((size_t)count == shard && st.MPI_SOURCE < p->workers);
			memcpy(m->grads + lo, in, shard);
			dt_optimizer_apply_range(o, m, lo, hi);
			h.stale = version - last[st.MPI_SOURCE];
			h.version = ++version;
			last[st.MPI_SOURCE] = version;
			memcpy(out, &h, sizeof(h));
			memcpy(out + sizeof(h), m->params + lo, shard);
			len += shard;
			break;
		case TAG_GATHER:
			h.version = o->iterations;
			memcpy(out, &h, sizeof(h));
			memcpy(out + len, m->params + lo, shard);
			len += shard;
			for (int i = 0; i < DT_OPT_MAX_SLOTS; i++) {
				if (o->slots[i])
					memcpy(out + len, o->slots[i] + lo, shard);
				else
					memset(out + len, 0, shard);
				len += shard;
			}
			break;
		case TAG_DONE: /* one byte: 1 when the workers stopped on a signal */
			done++;
			gone[st.MPI_SOURCE] = 1;
			p->stopped |= count == 1 && in[0];
			continue;
		default:
			DT_BUG("parameter server: message with tag %d from rank %d", st.MPI_TAG, st.MPI_SOURCE);
		}
		MPI_Isend(out, (int)len, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG == TAG_PUSH ? TAG_REPLY : TAG_STATE,
			  MPI_COMM_WORLD, &r);
		snprintf(peer, sizeof(peer), "worker rank %d", st.MPI_SOURCE);
		dt_mpi_wait_all(&r, 1, s->timeout, limit - s->timeout, who, "a server's reply", peer);
	}
	free(gone);
	free(heard);
	free(last);
	free(in);
	free(out);
	return 1;
}

/* The chief: the servers' shards (parameters, slots, step count) into its replica 0 and optimizer. */
static int gather_shards(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts)
{
	struct ps *p = s->priv;
	struct dt_model *m = &replicas[0];
	for (int k = 0; k < p->servers; k++) {
		int64_t n = p->hi[k] - p->lo[k];
		size_t shard = (size_t)n * sizeof(float), len = sizeof(struct reply_header) + (1 + DT_OPT_MAX_SLOTS) * shard;
		char *buf, peer[64];
		struct reply_header h;
		MPI_Request r[2];
		if (n == 0)
			continue;
		buf = dt_malloc(len);
		MPI_Irecv(buf, (int)len, MPI_BYTE, p->workers + k, TAG_STATE, MPI_COMM_WORLD, &r[0]);
		MPI_Isend(NULL, 0, MPI_BYTE, p->workers + k, TAG_GATHER, MPI_COMM_WORLD, &r[1]);
		server_rank_text(p, k, peer, sizeof(peer));
		dt_mpi_wait_all(r, 2, s->timeout, dt_mpi_grace(s->timeout), who, "the chief's gathering of the shards", peer);
		memcpy(&h, buf, sizeof(h));
		memcpy(m->params + p->lo[k], buf + sizeof(h), shard);
		for (int i = 0; i < DT_OPT_MAX_SLOTS; i++)
			if (opts[0].slots[i])
				memcpy(opts[0].slots[i] + p->lo[k], buf + sizeof(h) + (size_t)(i + 1) * shard, shard);
		opts[0].iterations = h.version;
		free(buf);
	}
	return 0;
}

/* Epoch end on the workers: staleness over the workers; the chief gathers the shards. */
static int ps_epoch_end(struct dt_strategy *s, struct dt_model *replicas, struct dt_optimizer *opts, int epoch)
{
	struct ps *p = s->priv;
	double sums[2] = { p->stale_sum, p->stale_n }, max = p->stale_max;

	dt_mpi_allreduce_double(&p->worker_group, sums, 2, "the staleness all-reduce", p->step);
	dt_mpi_allreduce_max(&p->worker_group, &max, 1, "the staleness all-reduce", p->step);
	p->stale_sum = p->stale_n = p->stale_max = 0;
	if (!s->is_chief)
		return 0;
	gather_shards(s, replicas, opts);
	snprintf(p->report, sizeof(p->report),
		 "parameter_server: epoch %d: %d %s, %d server%s, staleness mean %.2f, max %.0f steps behind\n",
		 epoch + 1, p->workers, workers_word(p->workers), p->servers, p->servers == 1 ? "" : "s",
		 sums[1] > 0 ? sums[0] / sums[1] : 0, max);
	return 0;
}

static void ps_reduce(struct dt_strategy *s, double *v, int n)
{
	struct ps *p = s->priv;
	dt_mpi_allreduce_double(&p->worker_group, v, n, "the metrics all-reduce", p->step);
}

static void ps_agree(struct dt_strategy *s, double *v, int n)
{
	struct ps *p = s->priv;
	dt_mpi_bcast(&p->worker_group, v, (int64_t)n * (int64_t)sizeof(double), "the chief's decision broadcast", p->step);
	/* After the epoch-end callbacks: the progress line is complete. */
	if (p->report[0]) {
		if (!s->quiet)
			fputs(p->report, stderr);
		p->report[0] = '\0';
	}
}

static void ps_release(struct dt_strategy *s)
{
	struct ps *p = s->priv;
	const char *stats = getenv("DTRAIN_STATS");
	char stopped = s->failed != 0;
	if (!p)
		return;
	if (s->failed > 0 && s->failed < 128)
		dt_mpi_abort_status(s->failed, "%s: rank %d failed (the error above); aborting the job", who, s->rank);
	if (!p->is_server) {
		/* Tell every server this worker is done (also after an error, so that they leave); no "alive" after it. */
		dt_mpi_watch(0, 0, 0);
		for (int k = 0; k < p->servers; k++) {
			MPI_Request r;
			char peer[64];
			server_rank_text(p, k, peer, sizeof(peer));
			MPI_Isend(&stopped, 1, MPI_BYTE, p->workers + k, TAG_DONE, MPI_COMM_WORLD, &r);
			dt_mpi_wait_all(&r, 1, s->timeout, dt_mpi_grace(s->timeout), who, "a worker's goodbye", peer);
		}
		if (stats && *stats && strcmp(stats, "0") && s->is_chief && p->step > 0)
			fprintf(stderr, "%s: %d %s, %lld steps, push and pull %.3f ms per step\n", who, p->workers,
				workers_word(p->workers), (long long)p->step, 1e3 * p->t_exchange / (double)p->step);
		for (int k = 0; p->reply && k < p->servers; k++)
			free(p->reply[k]);
		free(p->reply);
		free(p->reqs);
		/* Stopped on a signal: the workers leave together (the servers have their goodbyes). */
		if (s->failed)
			dt_mpi_leave_stopped(&p->worker_group);
	}
	dt_mpi_group_release(&p->worker_group);
	dt_mpi_group_release(&p->world_group);
	MPI_Comm_free(&p->worker_comm);
	free(p->lo);
	free(p->hi);
	stopped |= p->stopped;
	free(p);
	s->priv = NULL;
	if (!stopped)
		dt_mpi_stop();
}

const struct dt_strategy_type dt_parameter_server_strategy = {
	.name = "parameter_server",
	.check = ps_check,
	.init = ps_init,
	.broadcast = ps_broadcast,
	.apply_gradients = ps_apply,
	.asynchronous = 1,
	.reduce_sum = ps_reduce,
	.agree = ps_agree,
	.epoch_end = ps_epoch_end,
	.sync_state = gather_shards,
	.serve = ps_serve,
	.release = ps_release,
};
