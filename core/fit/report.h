/*
 * The evaluation report of `dtrain evaluate --report`: from a confusion
 * matrix (row the true class, column the prediction; core/model/metric.h),
 * each class's precision, recall, F1 and support, the accuracy, the macro
 * and support-weighted averages, and the matrix itself with the class
 * names, as a text table (scikit-learn's classification_report layout) or
 * as JSON.
 */
#ifndef DT_REPORT_H
#define DT_REPORT_H

#include <stdio.h>

#include <cjson/cJSON.h>

/*
 * cm: c x c whole-number counts (host); names: c class names, or NULL for
 * "0" .. "c-1". The table lists the classes with a test record or a
 * prediction, as scikit-learn's classification_report does by default:
 * the averages are over those.
 */
void dt_report_print(FILE *f, const double *cm, int c, const char *const *names);
/* The same as a JSON object the caller owns (cJSON_Delete), with "left_out": the classes it leaves out. */
cJSON *dt_report_json(const double *cm, int c, const char *const *names);
/* A note (stderr, unless quiet) naming the training classes the report leaves out, if any. */
void dt_report_note_left_out(const double *cm, int c, const char *const *names);

#endif
