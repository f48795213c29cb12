/*
 * The prefetch thread (data.prefetch > 0): it fills a ring of batches ahead
 * of the trainer with its own worker (order and scratch), in the order the
 * trainer asks for them. A request for another position drops the ring and
 * restarts the thread there (gen counts the restarts, so a batch filled for
 * an old position is not published). Errors in the thread are captured with
 * the batch and raised again in the reading thread.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/pipeline/internal.h"
#include "core/pipeline/pipeline.h"

/* A batch in the ring and what the thread reports with it. */
struct pl_slot {
	struct dt_batch b;
	int epoch;
	int64_t step;
	int rc;
	struct dt_error_capture err;
	int nskipped;
	int64_t *skipped; /* (B) */
};

struct dt_prefetch {
	struct dt_pipeline *p;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int nslots;
	struct pl_slot *slots;
	int head, count;           /* filled slots, in order */
	int next_epoch;            /* the position the thread produces next */
	int64_t next_step;
	uint64_t gen;              /* bumped by every restart */
	int stop, failed;
	struct dt_pipeline_worker *w;
};

/* The position after (epoch, step): step 0 of the next epoch after the last step (or steps_per_epoch). */
static void advance(const struct dt_pipeline *p, int *epoch, int64_t *step)
{
	int64_t steps = dt_pipeline_steps(p);
	if (p->steps_per_epoch > 0 && p->steps_per_epoch < steps)
		steps = p->steps_per_epoch;
	if (++*step >= steps) {
		*step = 0;
		*epoch = dt_pipeline_pos_epoch(p, *epoch + 1);
	}
}

static void *prefetch_main(void *arg)
{
	struct dt_prefetch *f = arg;
	struct dt_pipeline *p = f->p;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct pl_slot *s;
		uint64_t gen;
		int epoch, rc;
		int64_t step;

		while (!f->stop && (f->count == f->nslots || f->failed))
			pthread_cond_wait(&f->cv, &f->mu);
		if (f->stop)
			break;
		s = &f->slots[(f->head + f->count) % f->nslots];
		gen = f->gen;
		epoch = f->next_epoch;
		step = f->next_step;
		pthread_mutex_unlock(&f->mu);

		dt_error_capture(&s->err);
		rc = dt_pipeline_fill_batch(p, f->w, epoch, step, &s->b, s->skipped, &s->nskipped);
		dt_error_capture(NULL);

		pthread_mutex_lock(&f->mu);
		if (gen == f->gen) {
			s->epoch = epoch;
			s->step = step;
			s->rc = rc;
			f->count++;
			if (rc < 0)
				f->failed = 1;
			else
				advance(p, &f->next_epoch, &f->next_step);
		}
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* The ring, the worker and the lock of a thread that has stopped or never started. */
static void prefetch_free(struct dt_prefetch *f)
{
	for (int i = 0; i < f->nslots; i++) {
		dt_batch_free(&f->slots[i].b);
		free(f->slots[i].skipped);
	}
	free(f->slots);
	dt_pipeline_worker_free(f->w);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}

int dt_prefetch_start(struct dt_pipeline *p, int epoch, int64_t step)
{
	struct dt_prefetch *f = dt_calloc(1, sizeof(*f));
	f->p = p;
	f->nslots = p->prefetch;
	f->slots = dt_calloc(f->nslots, sizeof(*f->slots));
	for (int i = 0; i < f->nslots; i++) {
		dt_batch_alloc(&f->slots[i].b, p);
		f->slots[i].skipped = dt_malloc((size_t)p->batch_size * sizeof(int64_t));
	}
	f->w = dt_pipeline_worker_new(p);
	f->next_epoch = epoch;
	f->next_step = step;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	p->pf = f;
	if (pthread_create(&f->thread, NULL, prefetch_main, f)) {
		p->pf = NULL;
		prefetch_free(f);
		return dt_error("cannot start the prefetch thread of '%s' (set data.prefetch: 0)", p->src->name);
	}
	return 0;
}

void dt_prefetch_stop(struct dt_pipeline *p)
{
	struct dt_prefetch *f = p->pf;
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = 1;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	prefetch_free(f);
	p->pf = NULL;
}

static void copy_batch(const struct dt_pipeline *p, struct dt_batch *to, const struct dt_batch *from)
{
	to->n = from->n;
	to->offset = from->offset;
	to->total = from->total;
	memcpy(to->x, from->x, (size_t)from->n * dt_shape_count(&p->sample) * sizeof(float));
	memcpy(to->y, from->y, (size_t)from->n * dt_shape_count(&p->label) * sizeof(float));
	memcpy(to->records, from->records, (size_t)from->n * sizeof(*to->records));
}

int dt_prefetch_take(struct dt_pipeline *p, int epoch, int64_t step, struct dt_batch *b)
{
	struct dt_prefetch *f = p->pf;
	struct pl_slot *s;
	int e = dt_pipeline_pos_epoch(p, epoch), rc;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		if (f->count > 0) {
			s = &f->slots[f->head];
			if (s->epoch == e && s->step == step)
				break;
		} else if (f->next_epoch == e && f->next_step == step) {
			/* Being filled, or next (the thread advances next only when it publishes). */
			pthread_cond_wait(&f->cv, &f->mu);
			continue;
		}
		/* Somewhere else: drop what is queued and restart at (e, step). */
		f->gen++;
		f->head = f->count = 0;
		f->failed = 0;
		f->next_epoch = e;
		f->next_step = step;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);

	/* The thread never writes a filled slot, so the copy needs no lock. */
	rc = s->rc;
	if (rc < 0)
		dt_error_at(s->err.where, "%s", s->err.msg);
	else {
		copy_batch(p, b, &s->b);
		dt_pipeline_count_skipped(p, s->skipped, s->nskipped);
	}

	pthread_mutex_lock(&f->mu);
	if (rc == 0) {
		f->head = (f->head + 1) % f->nslots;
		f->count--;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return rc;
}
