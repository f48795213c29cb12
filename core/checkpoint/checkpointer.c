#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/checkpoint/checkpointer.h"
#include "core/checkpoint/ckpt_template.h"
#include "core/checkpoint/run_dir.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/run_config.h"
#include "core/error.h"

/*
 * The epoch's running sums as the metadata 'sums' holds them: a JSON array of
 * n numbers in %.17g, so the doubles come back bit for bit and a resumed epoch
 * reports the same metrics.
 */
static void format_sums(const double *sums, int n, char *buf, size_t size)
{
	size_t k = 0;
	for (int i = 0; i < n && k < size; i++)
		k += snprintf(buf + k, size - k, "%s%.17g", i ? "," : "[", sums[i]);
	if (k < size)
		snprintf(buf + k, size - k, "]");
}

/* The metrics' statistics as a JSON array (whole numbers print exactly), for the caller to free. */
static char *stats_json(const double *stats, int64_t n)
{
	size_t size = 32 * (size_t)n + 8, k = 0;
	char *buf = dt_calloc(size, 1);
	for (int64_t i = 0; i < n; i++)
		k += snprintf(buf + k, size - k, "%s%.17g", i ? "," : "[", stats[i]);
	snprintf(buf + k, size - k, "]");
	return buf;
}

/* Replaces dir/name by a symlink to target, atomically. */
static int replace_symlink(const char *dir, const char *name, const char *target)
{
	char tmp[4200], path[4200];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, name, (long)getpid());
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(tmp);
	if (symlink(target, tmp) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return dt_error("cannot point '%s' at '%s': %s", path, target, strerror(e));
	}
	return 0;
}

/* Makes dir/name a hard link to dir/file, atomically; copies it when links fail. */
static int replace_link(const char *dir, const char *name, const char *file)
{
	char tmp[4200], path[4200], src[4200];
	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, name, (long)getpid());
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(src, sizeof(src), "%s/%s", dir, file);
	unlink(tmp);
	if (link(src, tmp) == 0 && rename(tmp, path) == 0)
		return 0;
	unlink(tmp);
	{
		struct dt_ckpt *c = dt_checkpoint_load(src);
		struct dt_ckpt_tensor *t;
		struct dt_ckpt_meta *m;
		int n, rc, nm = 0;
		if (!c)
			return -1;
		n = dt_checkpoint_count(c);
		t = dt_calloc((size_t)n + 1, sizeof(*t));
		for (int i = 0; i < n; i++)
			t[i] = dt_checkpoint_at(c, i);
		m = dt_calloc(64, sizeof(*m));
		for (const char *const *k = (const char *const[]){ "format", "dtrain_version", "config", "epoch", "step",
				"global_step", "sums", "metric_stats", "monitor", "monitor_value", "best", "stopped", "optimizer.iterations",
				"optimizer.learning_rate", "callbacks", "checkpoint.files", "class_names", "num_classes",
				"feature_names", "preprocessing", "input_shape", "config_name", NULL }; *k; k++)
			if (dt_checkpoint_meta(c, *k))
				m[nm++] = (struct dt_ckpt_meta){ *k, dt_checkpoint_meta(c, *k) };
		rc = dt_checkpoint_save(path, t, n, m, nm);
		free(m);
		free(t);
		dt_checkpoint_free(c);
		return rc;
	}
}

/* The callbacks' states as one JSON object keyed by name, or NULL when none has one. */
static char *callback_states(const struct dt_trainer *t)
{
	cJSON *o = NULL;
	char *text;
	for (int i = 0; i < t->ncallbacks; i++) {
		struct dt_callback *cb = t->callbacks[i];
		char *state;
		cJSON *j;
		if (!cb->state_save || !cb->name || !(state = cb->state_save(cb, t)))
			continue;
		j = cJSON_Parse(state);
		if (!o)
			o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, cb->name, j ? j : cJSON_CreateString(state));
		free(state);
	}
	if (!o)
		return NULL;
	text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return text;
}

static char *file_list_json(char **files, int n)
{
	cJSON *a = cJSON_CreateArray();
	char *text;
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(files[i]));
	text = cJSON_PrintUnformatted(a);
	cJSON_Delete(a);
	return text;
}

/* A file-name field of the logs beyond the fixed ones ({auc}, {val_precision}, ...). */
static double logs_field(const void *logs, const char *name) { return dt_logs_get(logs, name); }

int dt_checkpointer_save(struct dt_checkpointer *c, const struct dt_trainer *t, const struct dt_fit_pos *pos)
{
	const struct dt_logs *logs = pos->logs;
	struct dt_ckpt_vars v = { 0 };
	struct dt_ckpt_meta meta[25 + DT_MAX_EXTRA_META];
	char name[1024], path[4200], epoch[32], step[32], gstep[32], sums[32 * DT_NSUMS], value[64], best[64], lr[32];
	char *states = NULL, *files_json, **files, *stats = NULL;
	const char *monitor = NULL;
	double monitored = 0;
	int nmeta = 0, improved = 0, nfiles = 0, rc = -1;

	DT_ASSERT(c->nextra_meta <= DT_MAX_EXTRA_META);
	v.epoch = pos->epoch_end ? pos->epoch : pos->epoch + 1;
	v.step = pos->global_step;
	v.batch = logs ? logs->step : pos->step;
	if (logs) {
		v.loss = logs->loss;
		v.accuracy = logs->accuracy;
		v.val_loss = logs->val_loss;
		v.val_accuracy = logs->val_accuracy;
		v.get = logs_field;
		v.ctx = logs;
	}
	if (pos->epoch_end && logs) {
		monitor = c->monitor ? c->monitor : logs->has_val ? "val_loss" : "loss";
		monitored = dt_logs_get(logs, monitor);
		if (isnan(monitored))
			monitor = NULL;
		else
			improved = !c->has_best || (c->mode > 0 ? monitored > c->best : monitored < c->best);
	}
	if (c->best_only && !improved)
		return 0;
	if (dt_ckpt_template_format(c->filename, &v, name, sizeof(name) - 16) < 0)
		return dt_error("checkpoint file name from '%s' is too long", c->filename);
	strcat(name, ".safetensors");
	snprintf(path, sizeof(path), "%s/%s", c->dir, name);

	/* The kept files after this one: name last, any older copy of it dropped. */
	files = dt_calloc((size_t)c->nfiles + 1, sizeof(*files));
	for (int i = 0; i < c->nfiles; i++)
		if (strcmp(c->files[i], name))
			files[nfiles++] = c->files[i];
	files[nfiles++] = name;
	{
		int first = c->keep > 0 && nfiles > c->keep ? nfiles - c->keep : 0;
		files_json = file_list_json(files + first, nfiles - first);
	}

	snprintf(epoch, sizeof(epoch), "%d", pos->epoch);
	snprintf(step, sizeof(step), "%lld", (long long)pos->step);
	snprintf(gstep, sizeof(gstep), "%lld", (long long)pos->global_step);
	/* The error sums only where they are reported: other runs' files stay as they were. */
	format_sums(pos->all_sums, t->errors ? DT_NSUMS : DT_SUM_ABS_ERROR, sums, sizeof(sums));
	snprintf(lr, sizeof(lr), "%.9g", dt_trainer_learning_rate(t));
	meta[nmeta++] = (struct dt_ckpt_meta){ "format", "dtrain" };
	meta[nmeta++] = (struct dt_ckpt_meta){ "dtrain_version", DT_VERSION };
	meta[nmeta++] = (struct dt_ckpt_meta){ "config", c->config_json };
	meta[nmeta++] = (struct dt_ckpt_meta){ "epoch", epoch };
	meta[nmeta++] = (struct dt_ckpt_meta){ "step", step };
	meta[nmeta++] = (struct dt_ckpt_meta){ "global_step", gstep };
	meta[nmeta++] = (struct dt_ckpt_meta){ "sums", sums };
	/* Mid-epoch only (an epoch's end starts the next from zero); files without it read as zeros. */
	if (t->metrics.nstats && pos->all_stats) {
		stats = stats_json(pos->all_stats, t->metrics.nstats);
		meta[nmeta++] = (struct dt_ckpt_meta){ "metric_stats", stats };
	}
	meta[nmeta++] = (struct dt_ckpt_meta){ "optimizer.learning_rate", lr };
	if (monitor) {
		snprintf(value, sizeof(value), "%.17g", monitored);
		meta[nmeta++] = (struct dt_ckpt_meta){ "monitor", monitor };
		meta[nmeta++] = (struct dt_ckpt_meta){ "monitor_value", value };
	}
	if (improved || c->has_best) {
		snprintf(best, sizeof(best), "%.17g", improved ? monitored : c->best);
		meta[nmeta++] = (struct dt_ckpt_meta){ "best", best };
	}
	if (improved && c->save_best)
		meta[nmeta++] = (struct dt_ckpt_meta){ "is_best", "1" };
	if (pos->stopped)
		meta[nmeta++] = (struct dt_ckpt_meta){ "stopped", "1" };
	if ((states = callback_states(t)))
		meta[nmeta++] = (struct dt_ckpt_meta){ "callbacks", states };
	meta[nmeta++] = (struct dt_ckpt_meta){ "checkpoint.files", files_json };
	for (int i = 0; i < c->nextra_meta; i++)
		meta[nmeta++] = c->extra_meta[i];

	if (dt_snapshot_save(path, &t->models[0], c->weights_only ? NULL : &t->opts[0], meta, nmeta) < 0)
		goto out;
	if (c->saver.resumable && replace_symlink(c->dir, "latest.safetensors", name) < 0)
		goto out;
	if (improved && c->save_best && replace_link(c->dir, "best.safetensors", name) < 0)
		goto out;
	if (improved) {
		c->best = monitored;
		c->has_best = 1;
	}
	/* Only now that latest names the new file: drop the oldest beyond keep. */
	while (c->keep > 0 && nfiles > c->keep) {
		char old[4200];
		snprintf(old, sizeof(old), "%s/%s", c->dir, files[0]);
		if (unlink(old) < 0 && errno != ENOENT)
			dt_warn("cannot remove the old checkpoint '%s': %s", old, strerror(errno));
		/* files[0] is one of c->files: freed below when dropped from the list. */
		memmove(files, files + 1, sizeof(*files) * (size_t)--nfiles);
	}
	{
		char **kept = dt_calloc((size_t)nfiles + 1, sizeof(*kept));
		for (int i = 0; i < nfiles; i++)
			kept[i] = dt_strdup(files[i]);
		for (int i = 0; i < c->nfiles; i++)
			free(c->files[i]);
		free(c->files);
		c->files = kept;
		c->nfiles = nfiles;
	}
	snprintf(c->last, sizeof(c->last), "%s", path);
	rc = 0;
out:
	free(stats);
	free(states);
	free(files_json);
	free(files);
	return rc;
}

/* The kept-file list from a JSON array of names (NULL: none); entries with a '/' are no files of dir. */
static void set_files(struct dt_checkpointer *c, const cJSON *names)
{
	const cJSON *e;
	dt_checkpointer_release(c);
	c->files = dt_calloc((size_t)cJSON_GetArraySize(names) + 1, sizeof(*c->files));
	cJSON_ArrayForEach(e, names)
		if (cJSON_IsString(e) && !strchr(e->valuestring, '/'))
			c->files[c->nfiles++] = dt_strdup(e->valuestring);
}

void dt_checkpointer_restore(struct dt_checkpointer *c, const struct dt_ckpt *f)
{
	const char *files = dt_checkpoint_meta(f, "checkpoint.files"), *best = dt_checkpoint_meta(f, "best");
	cJSON *a = files ? cJSON_Parse(files) : NULL;
	set_files(c, a);
	cJSON_Delete(a);
	if (best) {
		c->best = strtod(best, NULL);
		c->has_best = 1;
	}
	/* A crash between writing the newest file and linking best: link it now. */
	if (c->save_best && dt_checkpoint_meta(f, "is_best") && c->nfiles > 0)
		replace_link(c->dir, "best.safetensors", c->files[c->nfiles - 1]);
}

/* The largest whole number a JSON number (a double) holds exactly: what metadata counts stay below. */
#define EXACT_MAX ((int64_t)1 << 53)

/* "'ckpt': metadata 'key' is 'value', not ..." with the value cut short. */
static int bad_meta(const struct dt_ckpt *f, const char *key, const char *v, const char *expected)
{
	return dt_error("'%s': metadata '%s' is '%.40s%s', not %s", dt_checkpoint_path(f), key, v,
			strlen(v) > 40 ? "..." : "", expected);
}

/* Metadata `key` (present) as a whole number in [min, max]: the whole text, digits after an optional '-'. */
static int meta_int(const struct dt_ckpt *f, const char *key, int64_t min, int64_t max, int64_t *out)
{
	const char *v = dt_checkpoint_meta(f, key);
	char expected[96], *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || !*v || strspn(v + (*v == '-'), "0123456789") != strlen(v + (*v == '-')) || x < min || x > max) {
		snprintf(expected, sizeof(expected), "a whole number from %lld to %lld", (long long)min,
			 (long long)max);
		return bad_meta(f, key, v, expected);
	}
	*out = x;
	return 0;
}

/* Metadata `key` (present) as a finite number in [min, max], the whole text. */
static int meta_number(const struct dt_ckpt *f, const char *key, double min, double max, double *out)
{
	const char *v = dt_checkpoint_meta(f, key);
	char expected[96], *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || *end || *v == ' ' || !isfinite(x) || x < min || x > max) {
		if (isfinite(min))
			snprintf(expected, sizeof(expected), "a number from %g to %g", min, max);
		else
			snprintf(expected, sizeof(expected), "a finite number");
		return bad_meta(f, key, v, expected);
	}
	*out = x;
	return 0;
}

/*
 * The position: epoch (epochs completed), step (steps done in that epoch: at
 * most an epoch's steps under this config, all of them when validation was
 * cut short) and global_step (at least step).
 */
static int restore_position(struct dt_trainer *t, const struct dt_ckpt *f)
{
	int64_t epoch, steps = dt_pipeline_steps(t->train);
	char expected[96];

	if (t->steps_per_epoch > 0 && t->steps_per_epoch < steps)
		steps = t->steps_per_epoch;
	if (meta_int(f, "epoch", 0, DT_MAX_EPOCHS, &epoch) < 0 ||
	    meta_int(f, "step", 0, EXACT_MAX, &t->initial_step) < 0 ||
	    meta_int(f, "global_step", 0, EXACT_MAX, &t->initial_global_step) < 0)
		return -1;
	t->initial_epoch = (int)epoch;
	if (t->initial_step > steps) {
		snprintf(expected, sizeof(expected), "a step of an epoch of %lld steps (0 to %lld)", (long long)steps,
			 (long long)steps);
		return bad_meta(f, "step", dt_checkpoint_meta(f, "step"), expected);
	}
	if (t->initial_global_step < t->initial_step) {
		snprintf(expected, sizeof(expected), "at least the step in the epoch, %lld",
			 (long long)t->initial_step);
		return bad_meta(f, "global_step", dt_checkpoint_meta(f, "global_step"), expected);
	}
	return 0;
}

/* sums: 3 (loss, correct, samples) or DT_NSUMS numbers, each finite and >= 0, samples whole. */
static int restore_sums(struct dt_trainer *t, const struct dt_ckpt *f)
{
	const char *text = dt_checkpoint_meta(f, "sums");
	cJSON *j = cJSON_Parse(text);
	int n = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : -1, ok = n == DT_SUM_ABS_ERROR || n == DT_NSUMS;
	char buf[32 * DT_NSUMS];

	memset(t->initial_sums, 0, sizeof(t->initial_sums));
	for (int i = 0; ok && i < n; i++) {
		cJSON *x = cJSON_GetArrayItem(j, i);
		ok = cJSON_IsNumber(x) && isfinite(x->valuedouble) && x->valuedouble >= 0 &&
		     (i != DT_SUM_SAMPLES || x->valuedouble == floor(x->valuedouble));
		if (ok)
			t->initial_sums[i] = x->valuedouble;
	}
	cJSON_Delete(j);
	/* cJSON reads numbers with strtod: exact for the %.17g text, but check. */
	if (ok) {
		format_sums(t->initial_sums, n, buf, sizeof(buf));
		ok = !strcmp(buf, text);
	}
	if (!ok)
		return bad_meta(f, "sums", text, "a JSON array of 3 or 5 numbers >= 0 (loss, correct and samples, then "
				"the absolute and squared errors)");
	/* The file's sums are over every training process: the chief carries them, the others start from 0. */
	if (!t->strategy->is_chief)
		memset(t->initial_sums, 0, sizeof(t->initial_sums));
	return 0;
}

/*
 * metric_stats: the metrics' statistics, as many as the config's metrics
 * keep: counts (whole numbers >= 0), and the regression sums (finite).
 */
static int restore_stats(struct dt_trainer *t, const struct dt_ckpt *f)
{
	const char *text = dt_checkpoint_meta(f, "metric_stats");
	int64_t n = t->metrics.nstats;
	cJSON *j;
	int ok;
	char expected[96];

	free(t->initial_stats);
	t->initial_stats = NULL;
	if (!text || !n || !t->strategy->is_chief)
		return 0;
	j = cJSON_Parse(text);
	ok = cJSON_IsArray(j) && cJSON_GetArraySize(j) == n;
	t->initial_stats = dt_calloc((size_t)n, sizeof(double));
	for (int64_t i = 0; ok && i < n; i++) {
		cJSON *x = cJSON_GetArrayItem(j, (int)i);
		ok = cJSON_IsNumber(x) && isfinite(x->valuedouble) &&
		     (!dt_metric_stat_is_count(&t->metrics, i) ||
		      (x->valuedouble >= 0 && x->valuedouble == floor(x->valuedouble)));
		if (ok)
			t->initial_stats[i] = x->valuedouble;
	}
	cJSON_Delete(j);
	if (!ok) {
		snprintf(expected, sizeof(expected), "a JSON array of %lld numbers (compile.metrics' counts and sums)",
			 (long long)n);
		return bad_meta(f, "metric_stats", text, expected);
	}
	return 0;
}

/* The writer's metadata: checkpoint.files (a JSON array of file names in the run directory) and best. */
static int check_writer_meta(const struct dt_ckpt *f)
{
	const char *files = dt_checkpoint_meta(f, "checkpoint.files");
	cJSON *a = files ? cJSON_Parse(files) : NULL, *e;
	int ok = !files || cJSON_IsArray(a);
	double best;

	if (files && ok)
		cJSON_ArrayForEach(e, a)
			ok = ok && cJSON_IsString(e) && e->valuestring[0] && !strchr(e->valuestring, '/');
	cJSON_Delete(a);
	if (!ok)
		return bad_meta(f, "checkpoint.files", files, "a JSON array of file names (without '/')");
	if (dt_checkpoint_meta(f, "best") && meta_number(f, "best", -HUGE_VAL, HUGE_VAL, &best) < 0)
		return -1;
	return 0;
}

/* Hands each callback its state from the metadata 'callbacks' (a JSON object keyed by name). */
static int restore_callbacks(struct dt_trainer *t, const struct dt_ckpt *f)
{
	const char *v = dt_checkpoint_meta(f, "callbacks");
	cJSON *o = v ? cJSON_Parse(v) : NULL;
	int rc = 0;

	if (!v)
		return 0;
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return bad_meta(f, "callbacks", v, "a JSON object of the callbacks' states");
	}
	for (int i = 0; i < t->ncallbacks && rc == 0; i++) {
		struct dt_callback *cb = t->callbacks[i];
		cJSON *s;
		char *text;
		if (!cb->state_load || !cb->name || !(s = cJSON_GetObjectItemCaseSensitive(o, cb->name)))
			continue;
		text = cJSON_IsString(s) ? dt_strdup(s->valuestring) : cJSON_PrintUnformatted(s);
		rc = cb->state_load(cb, t, text);
		free(text);
	}
	cJSON_Delete(o);
	if (rc < 0)
		return dt_error("'%s': metadata 'callbacks' holds a state that cannot be restored",
				dt_checkpoint_path(f));
	return 0;
}

int dt_trainer_restore(struct dt_trainer *t, const struct dt_ckpt *f)
{
	const char *path = dt_checkpoint_path(f);
	const char *need[] = { "epoch", "step", "global_step", "sums", "optimizer.iterations" };
	int64_t iterations;
	double lr = 0;

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!dt_checkpoint_meta(f, need[i]))
			return dt_error("'%s' lacks the metadata '%s': it is not a full-state dtrain checkpoint "
					"(use --init-weights to start from its weights)", path, need[i]);
	/* Every field is checked before anything changes, with the same rules a config's values meet. */
	if (restore_position(t, f) < 0 || restore_sums(t, f) < 0 || restore_stats(t, f) < 0 ||
	    meta_int(f, "optimizer.iterations", 0, EXACT_MAX, &iterations) < 0 ||
	    (dt_checkpoint_meta(f, "optimizer.learning_rate") &&
	     meta_number(f, "optimizer.learning_rate", 0, DT_MAX_LEARNING_RATE, &lr) < 0) ||
	    check_writer_meta(f) < 0)
		return -1;
	for (int r = 0; r < t->strategy->nreplicas; r++) {
		if (dt_snapshot_load(f, &t->models[r], &t->opts[r]) < 0)
			return -1;
		t->opts[r].iterations = iterations;
	}
	if (dt_checkpoint_meta(f, "optimizer.learning_rate"))
		dt_trainer_set_learning_rate(t, lr);
	if (restore_callbacks(t, f) < 0)
		return -1;
	lr = dt_trainer_learning_rate(t);
	if (!(lr >= 0 && lr <= DT_MAX_LEARNING_RATE))
		return dt_error("'%s': metadata 'callbacks' sets the learning rate to %g, not a number from 0 to %g",
				path, lr, DT_MAX_LEARNING_RATE);
	return 0;
}

/* The state of a model_checkpoint writer, kept in the checkpoint section's files. */
static char *checkpointer_state_save(struct dt_callback *cb, const struct dt_trainer *t)
{
	struct dt_checkpointer *c = cb->priv;
	cJSON *o = cJSON_CreateObject();
	char *files = file_list_json(c->files, c->nfiles), *text;
	if (c->has_best)
		cJSON_AddNumberToObject(o, "best", c->best);
	cJSON_AddItemToObject(o, "files", cJSON_Parse(files));
	free(files);
	text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return text;
}

static int checkpointer_state_load(struct dt_callback *cb, struct dt_trainer *t, const char *json)
{
	struct dt_checkpointer *c = cb->priv;
	cJSON *o = cJSON_Parse(json), *best;
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return dt_error("the state of callback '%s' in the checkpoint is not a JSON object", cb->name);
	}
	best = cJSON_GetObjectItemCaseSensitive(o, "best");
	c->has_best = cJSON_IsNumber(best);
	c->best = c->has_best ? best->valuedouble : 0;
	set_files(c, cJSON_GetObjectItemCaseSensitive(o, "files"));
	cJSON_Delete(o);
	return 0;
}

static int saver_save(struct dt_saver *s, const struct dt_trainer *t, const struct dt_fit_pos *pos)
{
	struct dt_checkpointer *c = (struct dt_checkpointer *)((char *)s - offsetof(struct dt_checkpointer, saver));
	return dt_checkpointer_save(c, t, pos);
}

/*
 * Removes the temporary files (NAME.safetensors.tmp.PID, and the symlinks'
 * .latest.safetensors.tmp.PID) that writes cut short by a crash left in dir:
 * those of processes that no longer run, so that a live run's write into the
 * same directory is left alone.
 */
static void remove_stale_temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		const char *tmp = strstr(de->d_name, ".safetensors.tmp."), *digits;
		char old[4200], *end;
		long pid;
		if (!tmp)
			continue;
		digits = tmp + strlen(".safetensors.tmp.");
		pid = strtol(digits, &end, 10);
		if (end == digits || *end || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno == EPERM))
			continue;
		snprintf(old, sizeof(old), "%s/%s", dir, de->d_name);
		unlink(old);
	}
	if (d)
		closedir(d);
}

int dt_checkpointer_init(struct dt_checkpointer *c, const char *dir, const char *config_json)
{
	memset(c, 0, sizeof(*c));
	c->saver.save = saver_save;
	c->saver.at_epoch_end = 1;
	c->saver.resumable = 1;
	c->dir = dir;
	c->config_json = config_json;
	c->cb.name = "checkpoint";
	c->cb.priv = c;
	c->cb.state_save = checkpointer_state_save;
	c->cb.state_load = checkpointer_state_load;
	c->filename = "ckpt-{epoch:03d}-{batch:05d}";
	c->mode = -1;
	c->save_best = 1;
	if (dt_mkdir_p(dir) < 0)
		return -1;
	remove_stale_temporaries(dir);
	return 0;
}

void dt_checkpointer_configure(struct dt_checkpointer *c, const struct dt_run_config *cfg)
{
	c->saver.every = cfg->checkpoint_every;
	c->keep = cfg->checkpoint_keep;
	c->filename = cfg->checkpoint_filename;
	c->monitor = cfg->checkpoint_monitor;
	c->mode = cfg->checkpoint_mode ? cfg->checkpoint_mode : -1;
}

void dt_checkpointer_release(struct dt_checkpointer *c)
{
	for (int i = 0; i < c->nfiles; i++)
		free(c->files[i]);
	free(c->files);
	c->files = NULL;
	c->nfiles = 0;
}
