/*
 * The gradient sum of ranks that share a host, in shared memory (the
 * intra-node half of NCCL's and Horovod's all-reduce; on one host Open MPI's
 * MPI_Iallreduce pays for a kernel copy between the processes, page pinning
 * and a copy of the result, about 1 ms per step for the Fashion-MNIST MLP's
 * 2.7 MB).
 *
 * Each rank has a window of the whole buffer in one MPI shared-memory window
 * (MPI_Win_allocate_shared), and owns one chunk of it (the buffer cut in
 * as many chunks as ranks, on 64-byte lines). A sum:
 *   1. each rank copies the chunks it does not own into its window;
 *   2. all meet (a timed collective of the group: a stalled rank is named);
 *   3. each rank adds, in rank order, every rank's copy of the chunk it owns
 *      (its own from its buffer), into its buffer and its window;
 *   4. all meet again;
 *   5. each rank copies the other chunks, summed, from their owners' windows.
 * A rank writes a window slot only after a meeting that every reader of the
 * slot's previous contents has passed: the chunks it publishes in 1 were last
 * read in the previous sum's 3, its own chunk, written in 3, in the previous
 * sum's 5. Every chunk is summed once, by its owner, so every rank gets the
 * same bits.
 *
 * Only multi_worker.c uses it (strategies/ alone calls MPI).
 */
#ifndef DT_STRATEGIES_SHM_SUM_H
#define DT_STRATEGIES_SHM_SUM_H

#include <stdint.h>

#include "mpi_coll.h"

struct dt_shm_sum {
	MPI_Win win;
	int n, me;          /* the group's size and this rank's place in it */
	int64_t count;      /* floats summed */
	float **peer;       /* (n) each rank's window, mapped here */
	int64_t *lo;        /* (n + 1) chunk r is [lo[r], lo[r + 1]) */
};

/*
 * 1 when every member of comm runs on this host (MPI_Comm_split_type); a
 * collective of comm, called right after a timed one.
 */
int dt_shm_one_host(MPI_Comm comm);
/*
 * The directory of the window's backing file: Open MPI's
 * osc_sm_backing_directory (mpirun --mca sets it in the environment),
 * /dev/shm by default. A container's is often small (Docker's: 64 MB).
 */
const char *dt_shm_dir(void);
/*
 * Makes the window of count floats over g's members (all on one host): a
 * timed meeting, at which each member also tells whether dt_shm_dir() has
 * room for the backing file, then MPI_Win_allocate_shared. 0 when made; -1,
 * on every member alike, when some member's directory has too little room
 * (Open MPI would end the job): nothing is made, and *need and *avail are
 * this member's bytes needed and free (-1: the directory cannot be read).
 */
int dt_shm_sum_init(struct dt_shm_sum *s, struct dt_mpi_group *g, int64_t count, const char *what, double *need,
		    double *avail);
/* v[0..count) becomes the sum of every member's v; `what` and `step` name the sum in a timeout message. */
void dt_shm_sum(struct dt_shm_sum *s, struct dt_mpi_group *g, float *v, const char *what, int64_t step);
/*
 * Frees s; with collective, the window too (every member calls it then,
 * after its last sum; not after a failure or a stop, when the job ends anyway).
 */
void dt_shm_sum_release(struct dt_shm_sum *s, int collective);

#endif
