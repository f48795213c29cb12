/*
 * The resolved config that `dtrain config` prints: a document's tree (the
 * data file already included, --set applied) with the notes of the
 * recorder (core/config/config.h, dt_cfg_record): every default a reader
 * stored for an absent or null key added to its mapping, every path a reader
 * resolved written absolute. As YAML that dtrain fit reads back to the same
 * run, or as JSON (numbers, booleans and null typed).
 */
#ifndef DT_RESOLVED_H
#define DT_RESOLVED_H

#include <stdio.h>

#include "core/config/config.h"

/* Writes the tree under root (a mapping) with the recorder's notes to f, as YAML or JSON. 0, or -1 with an error. */
int dt_resolved_write(FILE *f, const struct dt_node *root, int json);

#endif
