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
#include "core/ops.h"

static const char usage[] =
	"usage: dtrain devices [--json]\n"
	"\n"
	"Prints the CPU, the ISA oneDNN uses, the GPUs, the MPI world and the\n"
	"strategy 'fit' would choose with 'strategy: auto'.\n"
	"\n"
	"  --json                 one JSON object on stdout\n"
	"  -h, --help             this help\n";

int cmd_devices(int argc, char **argv)
{
	struct dt_opts o;
	struct dt_system s;
	const dnnl_version_t *v = dnnl_version();
	const char *why, *strategy;
	char *ranks = NULL;
	int rc;

	if ((rc = dt_opts_parse(&o, argc, argv, "json", usage)) >= 0) {
		dt_opts_release(&o);
		return rc;
	}
	dt_system_detect(&s);
	strategy = dt_strategy_auto(&s, &why);
	if (dt_strategy_mpi_launched() && s.mpi_world > 1) {
		/* Every rank's host, devices and role, gathered on rank 0, which alone prints. */
		char mine[512], *all;
		if (o.json)
			snprintf(mine, sizeof(mine), "{\"rank\":%d,\"host\":\"%s\",\"devices\":[\"cpu:0\"],\"gpus\":%d,\"role\":\"%s\"}",
				 s.mpi_rank, s.host, s.gpus, s.mpi_rank == 0 ? "chief" : "worker");
		else
			snprintf(mine, sizeof(mine), "  rank %d: host %s, devices cpu:0, role %s", s.mpi_rank, s.host,
				 s.mpi_rank == 0 ? "chief" : "worker");
		all = dt_strategy_gather_lines(mine);
		if (!all) {
			dt_opts_release(&o);
			return DT_EXIT_OK;
		}
		ranks = all;
	}
	if (o.json) {
		cJSON *j = cJSON_CreateObject();
		char *text, onednn[32];
		snprintf(onednn, sizeof(onednn), "%d.%d.%d", v->major, v->minor, v->patch);
		cJSON_AddStringToObject(j, "cpu", s.cpu_model);
		cJSON_AddNumberToObject(j, "cpu_cores", s.cpu_cores);
		cJSON_AddStringToObject(j, "onednn", onednn);
		cJSON_AddStringToObject(j, "isa", dt_ops_cpu_isa());
		cJSON_AddNumberToObject(j, "threads", dt_ops_get_threads());
		cJSON_AddNumberToObject(j, "gpus", s.gpus);
		cJSON_AddBoolToObject(j, "cuda_backend", 0);
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
		printf("oneDNN:    %d.%d.%d, dispatching to %s, %d thread%s\n", v->major, v->minor, v->patch,
		       dt_ops_cpu_isa(), dt_ops_get_threads(), dt_ops_get_threads() == 1 ? "" : "s");
		printf("GPUs:      %d (this build has no CUDA backend)\n", s.gpus);
		printf("MPI:       world size %d, rank %d\n", s.mpi_world, s.mpi_rank);
		printf("Strategy:  %s (%s)\n", strategy, why);
		if (ranks)
			printf("Ranks:\n%s", ranks);
	}
	free(ranks);
	dt_opts_release(&o);
	return DT_EXIT_OK;
}
