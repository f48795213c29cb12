/*
 * MPI for the strategies: start-up only when launched by mpirun or srun, and
 * collectives that never hang silently.
 *
 * Every collective is non-blocking (MPI_Iallreduce, MPI_Ibcast) and polled
 * against a deadline (distribute.timeout). To name the ranks that did not
 * arrive, each rank first posts a tiny "arrived at collective k" message to
 * the group's rank 0 (MPI_Isend, eager, never waited for); rank 0 keeps one
 * receive posted per rank. On timeout rank 0 prints the ranks whose last
 * notice is older than k and aborts the job (MPI_Abort, status 1); the other
 * ranks wait a little longer than rank 0 so that its message comes first,
 * then abort too (rank 0 itself may be the missing one). A rank that waits
 * long repeats its notice every timeout/4 s, so that rank 0 can also name a
 * rank that entered the collective and then stopped (no notice for timeout/2).
 *
 * One line names the stalled rank, printed by the rank that waits on it
 * directly. Three rules make it so:
 * - the rank that noticed tells every other rank before MPI_Abort (an empty
 *   message on a communicator of its own); a rank that finds that notice
 *   while it waits, or before it would abort, leaves silently (exit status
 *   1): the healthy ranks that wait on the aborted ones, and the stalled
 *   rank when it is continued (SIGCONT, also mpirun's own before it kills),
 *   blame no one;
 * - a rank that may be waiting on a rank that itself waits on the stalled
 *   one waits `dt_mpi_grace` longer: in a group, rank 1 (it names rank 0
 *   when rank 0 did not name anyone), the others twice as long; a group
 *   with `grace` set defers to an observer;
 * - an observer (a parameter server) is told by each waiting rank that it
 *   is alive (dt_mpi_watch), so that silence means stalled;
 * - a rank that was itself stopped and is continued (SIGCONT) starts its
 *   wait afresh: the time it lost is not the others' fault, and they name
 *   it if it was too long.
 *
 * Only strategies/ calls MPI; core/ never does.
 */
#ifndef DT_STRATEGIES_MPI_COLL_H
#define DT_STRATEGIES_MPI_COLL_H

#include <stdint.h>

#include <mpi.h>

/* 1 when this process was started by mpirun (Open MPI, PMIx) or srun with more than one task. */
int dt_mpi_launched(void);
/* MPI_Init (once, thread level funneled) and the world's rank and size; 0 or -1 with an error. */
int dt_mpi_start(int *rank, int *world);
/* MPI_Finalize when dt_mpi_start ran; safe to call twice. */
void dt_mpi_stop(void);
/*
 * Prints "<msg>" as an error, tells every other rank the job is aborted (so
 * that they leave without a timeout message of their own) and aborts the
 * whole MPI job with status 1.
 */
_Noreturn void dt_mpi_abort(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with exit status `status` (mpirun exits with it). */
_Noreturn void dt_mpi_abort_status(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Monotonic seconds. */
double dt_mpi_now(void);
/* Between polls: spins for the first 2 ms of a wait, then sleeps 50 us (cores may be shared). */
void dt_mpi_backoff(double waited);
/* This host's name (static buffer). */
const char *dt_mpi_host(void);
/*
 * How much longer than distribute.timeout a rank waits when another rank,
 * closer to the missing one, should name it first: timeout/2, at most 10 s.
 */
double dt_mpi_grace(double timeout);
/* How many times this process was continued after a stop (SIGCONT, counted from dt_mpi_start). */
int dt_mpi_stops(void);
/*
 * Called in every wait: when another rank has aborted the job (dt_mpi_abort),
 * this rank exits at once with status 1 and prints nothing (the other rank
 * said why).
 */
void dt_mpi_check_abort(void);
/*
 * From now on, while this rank waits in an exchange, it sends an empty
 * message with `tag` to world ranks [first, first + n) every timeout/4 s: "alive,
 * waiting". n = 0 stops it (before the last message to those ranks).
 */
void dt_mpi_watch(int first, int n, int tag);

/* A communicator with arrival notices, for timeout-aware collectives. */
struct dt_mpi_group {
	MPI_Comm comm;
	int rank, size;
	int *world_ranks;       /* (size) the world rank of each member, for messages */
	double timeout;         /* seconds */
	double grace;           /* extra seconds every member waits (0; set after init): an observer names first */
	const char *who;        /* "multi_worker_mirrored", for messages */
	int64_t seq;            /* collectives entered */
	int64_t *arrived;       /* rank 0: (size) last notice from each member */
	int64_t *notice_buf;    /* rank 0: (size) receive buffers */
	MPI_Request *notice_req; /* rank 0: (size) posted receives */
	double *heard;          /* rank 0: (size) when each member's last notice came */
	int64_t notice_ring[64]; /* others: send buffers of the notices in flight */
	int64_t nsent;          /* others: notices sent */
};

/* Takes comm (not duplicated, not freed). Allocates the notice buffers. */
void dt_mpi_group_init(struct dt_mpi_group *g, MPI_Comm comm, double timeout, const char *who);
/* Collects the outstanding notices (rank 0) and cancels the posted receives. */
void dt_mpi_group_release(struct dt_mpi_group *g);

/*
 * In-place sums and a broadcast from member 0 over the group; `what` names
 * the collective in a timeout message ("the metrics all-reduce"), step the
 * training step (-1: none). They return only on success: a timeout aborts.
 */
void dt_mpi_allreduce_double(struct dt_mpi_group *g, double *v, int n, const char *what, int64_t step);
void dt_mpi_allreduce_max(struct dt_mpi_group *g, double *v, int n, const char *what, int64_t step);
/*
 * A float sum (the gradients), in parts, each summed by a ring of the
 * group's members: the part is cut in `size` chunks; in size - 1 steps each
 * member sends a chunk to the next member and adds the chunk the previous
 * one sent into its own (reduce-scatter), after which member r holds chunk
 * r + 1 summed over all; in size - 1 more steps the summed chunks go round
 * (all-gather). Each member sends and receives 2 (size - 1) / size of the
 * part at once. Open MPI's MPI_Iallreduce instead reduces to one member and
 * broadcasts back, one direction at a time, for any in-place sum and for
 * fewer than 4 members. With 2 ranks on a 2-vCPU Zen 3, fashion_mlp's wait
 * for its two buckets after backward went from 2.59 to 1.88 ms between two
 * network namespaces over TCP, and from 0.46 to 0.28 ms on one host
 * (tests/bench/strategies.sh). Each element is added up by one member and
 * copied to the others: the same bits on every rank.
 *
 * dt_mpi_ring_start posts part `index`'s first step (after an arrival
 * notice) and returns at once; tmp holds dt_mpi_ring_chunk(g, n) floats,
 * untouched by the caller until the sum is done. dt_mpi_ring_progress takes
 * the next steps of rings[0..n) whose messages are through (MPI moves them
 * only inside MPI calls); dt_mpi_ring_wait waits for them, watched as every
 * collective. Every member starts the same sequence of parts, and no two
 * parts of the same index are in flight at once.
 */
struct dt_mpi_ring {
	float *v, *tmp;     /* the part (n floats); the room for a chunk received */
	int64_t n;
	int tag;            /* the messages' tag on the group's communicator */
	int step;           /* steps done, of 2 (size - 1) */
	MPI_Request req[2]; /* the step's send and receive */
};

int64_t dt_mpi_ring_chunk(const struct dt_mpi_group *g, int64_t n);
void dt_mpi_ring_start(struct dt_mpi_group *g, struct dt_mpi_ring *r, int index, float *v, int64_t n, float *tmp);
void dt_mpi_ring_progress(struct dt_mpi_group *g, struct dt_mpi_ring *rings, int n);
void dt_mpi_ring_wait(struct dt_mpi_group *g, struct dt_mpi_ring *rings, int n, const char *what, int64_t step);
/*
 * After every rank stopped on a signal at the same step: one last meeting of
 * the group, so that the chief has written its checkpoint and said how to
 * resume (stdout flushed) before any rank leaves. The caller then skips
 * dt_mpi_stop: Open MPI's mpirun turns Ctrl-C into SIGTERM for every rank
 * while it ends the job, and MPI_Finalize would wait for it until it kills
 * the ranks.
 */
void dt_mpi_leave_stopped(struct dt_mpi_group *g);
void dt_mpi_bcast(struct dt_mpi_group *g, void *buf, int64_t bytes, const char *what, int64_t step);
/* Member 0's text (a string) on every member: a copy the caller frees, member 0's own included. */
char *dt_mpi_bcast_text(struct dt_mpi_group *g, const char *text, const char *what);

/*
 * Waits for reqs[0..n) until timeout + grace seconds have passed; on timeout
 * prints "<who>: <what> timed out after <timeout> s ... waiting for <peer>"
 * and aborts the job. Point-to-point exchanges (the parameter server) use it
 * directly; grace > 0 when the peer may itself be waiting on another rank
 * (then that rank speaks first).
 */
void dt_mpi_wait_all(MPI_Request *reqs, int n, double timeout, double grace, const char *who, const char *what,
		     const char *peer);

#endif
