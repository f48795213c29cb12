/*
 * fit's signal handlers (core/fit/train.c): one SIGINT or SIGTERM only sets a
 * flag (the loop stops after the step), a second one kills the process at
 * once with that signal, SIGUSR1 never ends it, and a signal the parent
 * ignored stays ignored. Each case runs in a child process.
 */
#include "helpers.h"

#include <signal.h>
#include <sys/wait.h>

#include "core/fit/train.h"

/*
 * Runs fn in a child; returns its wait status. The child starts with the
 * default SIGINT action: a background job (make check &) inherits SIGINT
 * ignored, which dtrain rightly keeps ignored.
 */
static int in_child(void (*fn)(void))
{
	int status;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void one_int(void)
{
	dt_fit_signals_install();
	raise(SIGINT);
}

static void two_ints(void)
{
	dt_fit_signals_install();
	raise(SIGINT);
	raise(SIGINT);
	_exit(3); /* not reached */
}

static void term_then_int(void)
{
	dt_fit_signals_install();
	raise(SIGTERM);
	raise(SIGINT);
	_exit(3);
}

static void usr1s(void)
{
	dt_fit_signals_install();
	for (int i = 0; i < 5; i++)
		raise(SIGUSR1);
}

static void ignored_int(void)
{
	signal(SIGINT, SIG_IGN);
	dt_fit_signals_install();
	raise(SIGINT);
	raise(SIGINT);
}

static void test_signals(void **state)
{
	int s;
	s = in_child(one_int);
	assert_true(WIFEXITED(s) && WEXITSTATUS(s) == 0);
	s = in_child(two_ints);
	assert_true(WIFSIGNALED(s) && WTERMSIG(s) == SIGINT);
	s = in_child(term_then_int);
	assert_true(WIFSIGNALED(s) && WTERMSIG(s) == SIGINT);
	s = in_child(usr1s);
	assert_true(WIFEXITED(s) && WEXITSTATUS(s) == 0);
	s = in_child(ignored_int);
	assert_true(WIFEXITED(s) && WEXITSTATUS(s) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_signals) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
