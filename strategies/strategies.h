/*
 * The strategies dtrain has, the machine they were chosen for, and the
 * auto-selection (DESIGN.md): MPI world > 1 -> multi_worker_mirrored
 * (parameter_server with num_ps); else `devices` naming several devices, or
 * more than one GPU -> mirrored; one GPU -> one_device gpu:0; else one_device
 * cpu:0. Every strategy is in the table. dt_strategy_check validates the
 * whole `distribute:` mapping without starting anything, before any data is
 * read; whether a GPU is there is checked when the strategy is created (a
 * GPU without the CUDA backend is a config error).
 */
#ifndef DT_STRATEGIES_H
#define DT_STRATEGIES_H

#include "core/fit/strategy.h"

struct dt_system {
	char cpu_model[128];
	int cpu_cores;      /* online logical CPUs */
	int gpus;           /* usable GPUs (0 without the CUDA backend) */
	int mpi_world;      /* processes in the MPI job, 1 without MPI */
	int mpi_rank;
	int mpi_launched;   /* started by mpirun or srun (not just a world size in the environment) */
	char host[256];     /* this host's name */
	/* How the job was started, for hints: "mpirun -np 2", "srun -n 2", "mpiexec -n 2"; "" for one process. */
	char launcher[64];
};

extern const struct dt_strategy_type dt_one_device_strategy;
extern const struct dt_strategy_type dt_mirrored_strategy;
extern const struct dt_strategy_type dt_multi_worker_strategy;
extern const struct dt_strategy_type dt_parameter_server_strategy;

/*
 * The `distribute:` keys every strategy accepts (so that one file runs with
 * `strategy: auto` on one process or under mpirun); each strategy uses those
 * it needs. strategy: a name of the table or auto (its node for errors);
 * device: cpu:N or gpu:N (one_device); devices: `auto` (ndevices 0) or a
 * list of cpu:N or gpu:N (whether a GPU exists is dt_local_devices' check);
 * num_ps >= 1; timeout > 0 seconds (default 300); bucket_mb >= 0 (default
 * 1): the gradient all-reduce's bucket size (multi_worker_mirrored);
 * communication: how multi_worker_mirrored sums CPU gradients (auto: in
 * shared memory when every rank is on one host, else MPI's all-reduce).
 */
enum dt_communication { DT_COMM_AUTO, DT_COMM_SHARED_MEMORY, DT_COMM_MPI };
struct dt_distribute {
	int which;                  /* index in the names the config accepts; 0: auto */
	const struct dt_node *strategy_node; /* NULL when absent */
	int has_device;
	struct dt_device device;
	const struct dt_node *device_node;  /* NULL when absent */
	int ndevices;
	struct dt_device devices[DT_MAX_REPLICAS];
	const struct dt_node *devices_node; /* for errors, NULL when absent */
	int num_ps;
	int has_num_ps;
	double timeout;
	double bucket_mb;
	int communication;          /* enum dt_communication */
	const struct dt_node *communication_node; /* for errors, NULL when absent */
};
int dt_distribute_read(const struct dt_node *args, struct dt_distribute *d);
/* The keys `distribute:` allows and the names `strategy:` takes (auto first), NULL-terminated. */
extern const char *const dt_distribute_keys[];
extern const char *const dt_strategy_names[];
/* 1 when `what` was started by mpirun or srun (MPI is to be initialized). */
int dt_strategy_mpi_launched(void);
/*
 * Under mpirun: rank 0 gets every rank's `mine` line (others get NULL); the
 * caller frees the result, lines separated by '\n'. Without MPI: a copy of mine.
 */
char *dt_strategy_gather_lines(const char *mine);
/* NULL-terminated. */
extern const struct dt_strategy_type *const dt_strategy_types[];

void dt_system_detect(struct dt_system *s);
/*
 * The strategy `strategy: auto` picks on this system for the `distribute:`
 * keys d (NULL: none), and why, in words ("no GPU and one process"): what
 * `dtrain devices` and fit's strategy line say. The name is a static string.
 */
const char *dt_strategy_auto(const struct dt_system *s, const struct dt_distribute *d, char *why, size_t size);
/*
 * Validates the `distribute:` mapping (NULL: auto) without starting anything
 * (no MPI, no GPU library): every key and value and the strategy's own rules.
 * With sys, also the rules of this job, for a process that runs the
 * strategy: a one-process strategy (one_device, mirrored) refused in an MPI
 * job of several processes, parameter_server's num_ps + 1 processes. 0, or
 * -1 after an error that names the config position where there is one.
 */
int dt_strategy_check(const struct dt_node *distribute, const struct dt_system *sys);
/*
 * Creates the strategy named by the `distribute:` mapping (NULL: auto), after
 * dt_strategy_check. Errors point into the config. 0 or -1.
 */
int dt_strategy_create(struct dt_strategy *s, const struct dt_node *distribute, const struct dt_system *sys);
/*
 * One line that says what s does and why, for fit:
 * "mirrored over cpu:0, cpu:1 (distribute.devices names 2 devices)".
 */
void dt_strategy_describe(const struct dt_strategy *s, char *buf, size_t size);
void dt_strategy_release(struct dt_strategy *s);

#endif
