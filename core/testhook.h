/*
 * A test hook, for the resume tests only (not a user feature, not in the man
 * pages): with DTRAIN_TEST_CRASH_AT=POINT:N in the environment, the N-th time
 * (1-based) this process reaches POINT it kills itself with SIGKILL, as a
 * power cut or the OOM killer would. Points:
 *   step              after a training step's update, before anything is saved
 *   checkpoint-write  in the middle of writing a checkpoint's temporary file
 *   evaluate          after the first batch of an evaluation
 *
 * DTRAIN_TEST_RAISE_AT=SIG:N (SIG one of INT, TERM, USR1) sends SIG to the
 * process itself after training step N (counted from the start of the run),
 * so that signal tests hit an exact step; SIG:evaluate, after the first batch
 * of the first evaluation.
 */
#ifndef DT_TESTHOOK_H
#define DT_TESTHOOK_H

#include <stdint.h>

void dt_test_crash_point(const char *point);
void dt_test_raise_at(int64_t global_step);
void dt_test_raise_in(const char *point);

#endif
