/*
 * A test hook, for the resume tests only (not a user feature, not in the man
 * pages): with DTRAIN_TEST_CRASH_AT=POINT:N in the environment, the N-th time
 * (1-based) this process reaches POINT it kills itself with SIGKILL, as a
 * power cut or the OOM killer would. Points:
 *   step              after a training step's update, before anything is saved
 *   checkpoint-write  in the middle of writing a checkpoint's temporary file
 *   evaluate          after the first batch of an evaluation
 */
#ifndef DT_TESTHOOK_H
#define DT_TESTHOOK_H

void dt_test_crash_point(const char *point);

#endif
