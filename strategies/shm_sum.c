/* The gradient sum of ranks on one host, in an MPI shared-memory window (shm_sum.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "core/error.h"
#include "shm_sum.h"

/* Below this many floats a loop runs on one thread. */
#define PAR_MIN (1 << 16)

int dt_shm_one_host(MPI_Comm comm)
{
	MPI_Comm host;
	int size, here;
	MPI_Comm_size(comm, &size);
	MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
	MPI_Comm_size(host, &here);
	MPI_Comm_free(&host);
	return here == size;
}

const char *dt_shm_dir(void)
{
	const char *dir = getenv("OMPI_MCA_osc_sm_backing_directory");
	return dir && *dir ? dir : "/dev/shm";
}

/* The bytes free in dir; -1 when it cannot be read (Open MPI could not use it either). */
static double free_bytes(const char *dir)
{
	struct statvfs v;
	return statvfs(dir, &v) == 0 ? (double)v.f_bavail * (double)v.f_frsize : -1;
}

int dt_shm_sum_init(struct dt_shm_sum *s, struct dt_mpi_group *g, int64_t count, const char *what, double *need,
		    double *avail)
{
	/*
	 * Each rank's part: whole lines and one more, so that it starts at its
	 * first line boundary (Open MPI's start 8 bytes past one; the mappings
	 * are page-aligned, so every process finds the same boundary).
	 */
	int64_t lines = (count + 15) / 16;
	MPI_Aint part = (MPI_Aint)(lines + 1) * 64;
	double short_by;
	float *mine;

	memset(s, 0, sizeof(*s));
	/* One file holds every part; 64 KiB more covers Open MPI's header and the pages' rounding. */
	*need = (double)part * g->size + 65536;
	*avail = free_bytes(dt_shm_dir());
	/* The allocation below waits for every member without a deadline: meet on a timed collective first. */
	short_by = *need - *avail;
	dt_mpi_allreduce_max(g, &short_by, 1, what, -1);
	if (short_by > 0)
		return -1;
	s->n = g->size;
	s->me = g->rank;
	s->count = count;
	DT_ASSERT(MPI_Win_allocate_shared(part, 1, MPI_INFO_NULL, g->comm, &mine, &s->win) == MPI_SUCCESS);
	s->peer = dt_calloc((size_t)s->n, sizeof(*s->peer));
	for (int r = 0; r < s->n; r++) {
		MPI_Aint bytes;
		int unit;
		char *base;
		MPI_Win_shared_query(s->win, r, &bytes, &unit, &base);
		s->peer[r] = (float *)(base + (64 - (uintptr_t)base % 64) % 64);
	}
	/* Chunks of whole lines: two ranks never write one line. */
	s->lo = dt_calloc((size_t)s->n + 1, sizeof(*s->lo));
	for (int r = 0; r <= s->n; r++) {
		int64_t lo = lines * r / s->n * 16;
		s->lo[r] = lo < count ? lo : count;
	}
	/* One passive epoch for the window's life; MPI_Win_sync orders the stores around each meeting. */
	MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win);
	return 0;
}

/* A meeting of every member, its stores before it seen by all after it. */
static void meet(struct dt_shm_sum *s, struct dt_mpi_group *g, const char *what, int64_t step)
{
	double arrived = 1;
	MPI_Win_sync(s->win);
	dt_mpi_allreduce_max(g, &arrived, 1, what, step);
	MPI_Win_sync(s->win);
}

/* to[0..n) += from[0..n) */
static void add(float *restrict to, const float *restrict from, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		to[i] += from[i];
}

void dt_shm_sum(struct dt_shm_sum *s, struct dt_mpi_group *g, float *v, const char *what, int64_t step)
{
	enum { TILE = 1024 };
	float *mine = s->peer[s->me];
	int64_t lo = s->lo[s->me], hi = s->lo[s->me + 1];

	for (int c = 0; c < s->n; c++)
		if (c != s->me)
			memcpy(mine + s->lo[c], v + s->lo[c], (size_t)(s->lo[c + 1] - s->lo[c]) * sizeof(float));
	meet(s, g, what, step);
	/* This rank's chunk, a tile at a time in L1: every rank's copy added in rank order (its own is v). */
#pragma omp parallel for if (hi - lo > PAR_MIN)
	for (int64_t t = lo; t < hi; t += TILE) {
		float sum[TILE];
		int64_t k = hi - t < TILE ? hi - t : TILE;
		memcpy(sum, (s->me == 0 ? v : s->peer[0]) + t, (size_t)k * sizeof(float));
		for (int q = 1; q < s->n; q++)
			add(sum, (q == s->me ? v : s->peer[q]) + t, k);
		memcpy(mine + t, sum, (size_t)k * sizeof(float));
		memcpy(v + t, sum, (size_t)k * sizeof(float));
	}
	meet(s, g, what, step);
	for (int c = 0; c < s->n; c++)
		if (c != s->me)
			memcpy(v + s->lo[c], s->peer[c] + s->lo[c], (size_t)(s->lo[c + 1] - s->lo[c]) * sizeof(float));
}

void dt_shm_sum_release(struct dt_shm_sum *s, int collective)
{
	if (!s->peer)
		return;
	if (collective) {
		MPI_Win_unlock_all(s->win);
		MPI_Win_free(&s->win);
	}
	free(s->peer);
	free(s->lo);
	memset(s, 0, sizeof(*s));
}
