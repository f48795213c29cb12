#include <string.h>

#include "core/config/monitor.h"
#include "core/model/metric.h"

const char *const dt_monitor_names[] = { "loss", "accuracy", "mae", "rmse", "val_loss", "val_accuracy", "val_mae",
					 "val_rmse", "learning_rate", NULL };

int dt_monitor_read(const struct dt_node *args, const char *def, const char **name, enum dt_monitor_mode *mode)
{
	static const char *const modes[] = { "auto", "min", "max", NULL };
	const struct dt_node *n = dt_node_get(args, "monitor");
	const char *close;
	int m;

	if (dt_cfg_string(args, "monitor", def, name) < 0 || dt_cfg_enum(args, "mode", modes, DT_MONITOR_AUTO, &m) < 0)
		return -1;
	*mode = (enum dt_monitor_mode)m;
	if (!n)
		return 0;
	for (int i = 0; dt_monitor_names[i]; i++)
		if (!strcmp(dt_monitor_names[i], *name))
			return 0;
	/* compile.metrics' names (auc, precision_1, val_f1_score, ...): dt_monitor_check sees whether fit reports them. */
	if (dt_metric_is_table_name(strncmp(*name, "val_", 4) ? *name : *name + 4))
		return 0;
	close = dt_did_you_mean_config(*name, dt_monitor_names);
	if (close)
		return dt_node_error(n, "unknown metric '%s' to monitor; did you mean '%s'?", *name, close);
	return dt_node_error(n, "unknown metric '%s' to monitor (expected one of: loss, accuracy, mae, rmse, val_loss, "
			     "val_accuracy, val_mae, val_rmse, learning_rate, or a metric of compile.metrics such as "
			     "auc or val_precision)", *name);
}

int dt_monitor_greater(enum dt_monitor_mode mode, const char *name)
{
	if (mode != DT_MONITOR_AUTO)
		return mode == DT_MONITOR_MAX;
	if (!name)
		return 0;
	if (!strncmp(name, "val_", 4))
		name += 4;
	/* The metrics of the table grow better (auc, precision, r2_score, ...), but the errors mse and mape. */
	return strstr(name, "acc") || dt_metric_name_greater(name);
}

int dt_monitor_check(const struct dt_node *where, const char *what, const char *name, int accuracy, int errors,
		     int has_val, const struct dt_metric_set *metrics)
{
	const char *base = strncmp(name, "val_", 4) ? name : name + 4;
	if (!has_val && base != name)
		return dt_node_error(where, "'%s' monitors '%s' but fit has no validation data (set data.validation "
				     "or data.validation_split, or monitor '%s')", what, name, base);
	if (!accuracy && !strcmp(base, "accuracy"))
		return dt_node_error(where, "'%s' monitors '%s' but compile.metrics has no 'accuracy'", what, name);
	if (!errors && (!strcmp(base, "mae") || !strcmp(base, "rmse")))
		return dt_node_error(where, "'%s' monitors '%s', which fit reports for a regression loss or with "
				     "compile.metrics: [mae] or [rmse]", what, name);
	if (dt_metric_is_table_name(base) && !dt_metric_find(metrics, base, NULL))
		return dt_node_error(where, "'%s' monitors '%s' but compile.metrics has no metric named '%s'", what, name,
				     base);
	return 0;
}
