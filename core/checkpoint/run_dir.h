/*
 * The run directory: checkpoint.dir, or runs/NAME when the config gives none.
 * fit writes there; evaluate and predict read their default checkpoint there.
 */
#ifndef DT_RUN_DIR_H
#define DT_RUN_DIR_H

#include <stddef.h>

#include "core/config/run_config.h"

/* The run directory of cfg into buf. */
void dt_run_dir(const struct dt_run_config *cfg, char *buf, size_t size);
/* RUN_DIR/name into buf ("latest.safetensors", ...). */
void dt_run_dir_file(const struct dt_run_config *cfg, const char *name, char *buf, size_t size);
/*
 * The checkpoint evaluate and predict read: given (--checkpoint) when not
 * NULL; else RUN_DIR/best.safetensors when the run saved one, else
 * RUN_DIR/latest.safetensors, and a note on stderr says which.
 */
void dt_run_dir_checkpoint(const struct dt_run_config *cfg, const char *given, char *buf, size_t size);
/* Creates a directory and its parents, like mkdir -p. 0 or -1 with an error. */
int dt_mkdir_p(const char *path);

#endif
