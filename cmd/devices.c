/*
 * dtrain devices: what dtrain found on this machine and which strategy fit
 * would choose (man dtrain-devices).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <oneapi/dnnl/dnnl.h>

#include "cmd.h"
#include "core/cuda/cuda.h"
#include "core/ops.h"

static const char usage[] =
	"usage: dtrain devices [--json]\n"
	"\n"
	"Prints the CPU, the ISA oneDNN uses, the GPUs, the MPI world and the\n"
	"strategy 'fit' would choose with 'strategy: auto'.\n"
	"\n"
	"  --json                 one JSON object on stdout\n"
	"  -h, --help             this help\n";

/* The GPUs and library versions, from the CUDA backend (loaded only when there are GPUs). */
struct gpus {
	const struct dt_cuda_api *api;
	int n;
	struct dt_gpu_info info[16];
	char runtime[16], cudnn[16], nccl[16];
};

static void version3(char *buf, size_t size, int v)
{
	snprintf(buf, size, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

static void gpus_find(struct gpus *g, int count)
{
	memset(g, 0, sizeof(*g));
	if (count == 0 || !(g->api = dt_cuda()))
		return;
	for (int i = 0; i < count && i < 16; i++)
		if (g->api->device_info(i, &g->info[g->n]) == 0)
			g->n++;
	snprintf(g->runtime, sizeof(g->runtime), "%d.%d", g->api->runtime_version() / 1000,
		 g->api->runtime_version() % 1000 / 10);
	version3(g->cudnn, sizeof(g->cudnn), g->api->cudnn_version());
	version3(g->nccl, sizeof(g->nccl), g->api->nccl_version());
}

/* "(this build has no CUDA backend)", "(CUDA 13.0, cuDNN 9.19.0, NCCL 2.28.9)", ... */
static void gpus_note(const struct gpus *g, int count, char *buf, size_t size)
{
	if (!dt_cuda_built())
		snprintf(buf, size, "this build has no CUDA backend");
	else if (count == 0)
		snprintf(buf, size, "CUDA backend built; no NVIDIA driver or GPU found");
	else if (!g->api)
		snprintf(buf, size, "%s", dt_cuda_why());
	else
		snprintf(buf, size, "CUDA %s, cuDNN %s, NCCL %s", g->runtime, g->cudnn, g->nccl);
}

/* This rank's line of the Ranks list: a JSON object, or text. */
static void rank_line(const struct dt_system *s, int json, char *buf, size_t size)
{
	const char *role = s->mpi_rank == 0 ? "chief" : "worker";
	if (json)
		snprintf(buf, size, "{\"rank\":%d,\"host\":\"%s\",\"devices\":[\"cpu:0\"],\"gpus\":%d,\"role\":\"%s\"}",
			 s->mpi_rank, s->host, s->gpus, role);
	else
		snprintf(buf, size, "  rank %d: host %s, devices cpu:0, role %s", s->mpi_rank, s->host, role);
}

int cmd_devices(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_system s;
	const dnnl_version_t *v = dnnl_version();
	const char *strategy;
	char *ranks = NULL;
	struct gpus g;
	char note[1024], why[160];
	int rc, slowest;
	double round_trip;

	if ((rc = dt_opts_parse(&o, argc, argv, "json", usage)) >= 0) {
		dt_opts_release(&o);
		return rc;
	}
	dt_system_detect(&s);
	strategy = dt_strategy_auto(&s, NULL, why, sizeof(why));
	if (dt_strategy_mpi_launched() && s.mpi_world > 1) {
		/* Every rank's host, devices and role, gathered on rank 0, which alone prints. */
		char mine[512], *all;
		rank_line(&s, o.json, mine, sizeof(mine));
		all = dt_strategy_gather_lines(mine);
		if (!all) {
			dt_opts_release(&o);
			return DT_EXIT_OK;
		}
		ranks = all;
	}
	gpus_find(&g, s.gpus);
	round_trip = dt_ops_thread_round_trip_ns(&slowest);
	gpus_note(&g, s.gpus, note, sizeof(note));
	if (o.json) {
		cJSON *j = cJSON_CreateObject();
		char *text, onednn[32];
		snprintf(onednn, sizeof(onednn), "%d.%d.%d", v->major, v->minor, v->patch);
		cJSON_AddStringToObject(j, "cpu", s.cpu_model);
		cJSON_AddNumberToObject(j, "cpu_cores", s.cpu_cores);
		cJSON_AddStringToObject(j, "onednn", onednn);
		cJSON_AddStringToObject(j, "isa", dt_ops_cpu_isa());
		cJSON *prec = cJSON_AddArrayToObject(j, "cpu_precisions");
		cJSON_AddItemToArray(prec, cJSON_CreateString("fp32"));
		if (dt_ops_cpu_has_bf16())
			cJSON_AddItemToArray(prec, cJSON_CreateString("bf16"));
		cJSON_AddNumberToObject(j, "threads", dt_ops_get_threads());
		cJSON_AddNumberToObject(j, "thread_round_trip_ns", round_trip);
		cJSON_AddNumberToObject(j, "gpus", s.gpus);
		cJSON_AddBoolToObject(j, "cuda_backend", dt_cuda_built());
		if (g.api) {
			cJSON *list = cJSON_AddArrayToObject(j, "gpu_list");
			for (int i = 0; i < g.n; i++) {
				cJSON *d = cJSON_CreateObject();
				char cc[16];
				snprintf(cc, sizeof(cc), "%d.%d", g.info[i].cc_major, g.info[i].cc_minor);
				cJSON_AddNumberToObject(d, "index", i);
				cJSON_AddStringToObject(d, "name", g.info[i].name);
				cJSON_AddNumberToObject(d, "memory_bytes", (double)g.info[i].memory);
				cJSON_AddStringToObject(d, "compute_capability", cc);
				cJSON_AddItemToArray(list, d);
			}
			cJSON_AddStringToObject(j, "cuda_runtime", g.runtime);
			cJSON_AddStringToObject(j, "cudnn", g.cudnn);
			cJSON_AddStringToObject(j, "nccl", g.nccl);
		}
		cJSON_AddNumberToObject(j, "mpi_world_size", s.mpi_world);
		cJSON_AddNumberToObject(j, "mpi_rank", s.mpi_rank);
		cJSON_AddStringToObject(j, "strategy", strategy);
		cJSON_AddStringToObject(j, "reason", why);
		if (ranks) {
			cJSON *arr = cJSON_AddArrayToObject(j, "ranks");
			for (char *line = strtok(ranks, "\n"); line; line = strtok(NULL, "\n"))
				cJSON_AddItemToArray(arr, cJSON_Parse(line));
		}
		text = cJSON_PrintUnformatted(j);
		printf("%s\n", text);
		free(text);
		cJSON_Delete(j);
	} else {
		printf("CPU:       %s, %d cores\n", s.cpu_model, s.cpu_cores);
		printf("oneDNN:    %d.%d.%d, dispatching to %s, %d thread%s", v->major, v->minor, v->patch,
		       dt_ops_cpu_isa(), dt_ops_get_threads(), dt_ops_get_threads() == 1 ? "" : "s");
		if (dt_ops_get_threads() > 1)
			printf(" (a cache line from thread 0 to thread %d and back: %.0f ns)", slowest, round_trip);
		printf("\n");
		printf("Precision: fp32%s on the CPU (compile.precision)\n", dt_ops_cpu_has_bf16() ? ", bf16" : "");
		printf("GPUs:      %d (%s)\n", s.gpus, note);
		for (int i = 0; i < g.n; i++)
			printf("  gpu:%-6d%s, %.1f GiB, compute capability %d.%d\n", i, g.info[i].name,
			       (double)g.info[i].memory / (1 << 30), g.info[i].cc_major, g.info[i].cc_minor);
		printf("MPI:       world size %d, rank %d\n", s.mpi_world, s.mpi_rank);
		printf("Strategy:  %s (%s)\n", strategy, why);
		if (ranks)
			printf("Ranks:\n%s", ranks);
	}
	free(ranks);
	dt_opts_release(&o);
	return DT_EXIT_OK;
}
