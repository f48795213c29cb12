/*
 * The loader of the CUDA backend (core/cuda/cuda.h): GPU counting through the
 * driver alone, the backend's shared object on first use, pinned host
 * buffers and the precision switch. Built in every configuration: without the
 * CUDA build the object is simply not found and dtrain reports 0 GPUs.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cuda/cuda.h"
#include "core/error.h"

#ifndef DT_CUDA_BUILT
#define DT_CUDA_BUILT 0
#endif

#define LIB_NAME "libdtrain_cuda.so"

int dt_cuda_built(void) { return DT_CUDA_BUILT; }

/* ---- counting GPUs through the driver API ---- */

static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int gpu_count;

static void count_init(void)
{
	typedef int (*init_fn)(unsigned);
	typedef int (*count_fn)(int *);
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");
	void *h;
	init_fn cu_init;
	count_fn cu_count;
	int n = 0;

	gpu_count = 0;
	if (!DT_CUDA_BUILT || (visible && !*visible))
		return;
	/* No device node: no NVIDIA driver loaded; skip even opening libcuda. */
	if (access("/dev/nvidiactl", F_OK) != 0 && access("/dev/nvidia0", F_OK) != 0)
		return;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return;
	cu_init = (init_fn)(uintptr_t)dlsym(h, "cuInit");
	cu_count = (count_fn)(uintptr_t)dlsym(h, "cuDeviceGetCount");
	if (cu_init && cu_count && cu_init(0) == 0 && cu_count(&n) == 0 && n > 0)
		gpu_count = n;
	/* libcuda stays loaded: the backend will need it. */
}

int dt_cuda_device_count(void)
{
	pthread_once(&count_once, count_init);
	return gpu_count;
}

/* ---- the backend object ---- */

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const struct dt_cuda_api *api;
static const char *why = "not loaded yet";
static char why_buf[PATH_MAX + 256];

/* dlopen()s path; 1 when it gave a usable API. */
static int try_load(const char *path)
{
	typedef const struct dt_cuda_api *(*get_fn)(void);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	get_fn get;
	const struct dt_cuda_api *a;

	if (!h) {
		if (access(path, F_OK) == 0) {
			snprintf(why_buf, sizeof(why_buf), "cannot load '%s': %s", path, dlerror());
			why = why_buf;
		}
		return 0;
	}
	get = (get_fn)(uintptr_t)dlsym(h, "dt_cuda_api_get");
	a = get ? get() : NULL;
	if (!a || a->abi != DT_CUDA_ABI) {
		snprintf(why_buf, sizeof(why_buf), "'%s' is not a dtrain %s CUDA backend", path, DT_VERSION);
		why = why_buf;
		dlclose(h);
		return 0;
	}
	api = a;
	return 1;
}

static void load_init(void)
{
	const char *env = getenv("DTRAIN_CUDA_LIB");
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t k;

	if (!DT_CUDA_BUILT) {
		why = "this build of dtrain has no CUDA backend (built with CUDA=0 or without nvcc)";
		return;
	}
	why = "the CUDA backend (" LIB_NAME ") was not found next to dtrain or in ../lib/dtrain";
	if (env && *env) {
		if (!try_load(env) && why != why_buf) {
			snprintf(why_buf, sizeof(why_buf), "DTRAIN_CUDA_LIB='%s': no such file", env);
			why = why_buf;
		}
		return;
	}
	k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k <= 0)
		return;
	exe[k] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof(path), "%s/" LIB_NAME, exe);
	if (try_load(path))
		return;
	snprintf(path, sizeof(path), "%s/../lib/dtrain/" LIB_NAME, exe);
	try_load(path);
}

const struct dt_cuda_api *dt_cuda(void)
{
	pthread_once(&load_once, load_init);
	return api;
}

const char *dt_cuda_why(void)
{
	dt_cuda();
	return api ? "" : why;
}

int dt_cuda_check_device(int index, char *err, size_t errsize)
{
	int n;
	if (!dt_cuda()) {
		snprintf(err, errsize, "%s", why);
		return -1;
	}
	n = api->device_count();
	if (index < 0 || index >= n) {
		if (n == 0)
			snprintf(err, errsize, "no GPU found (no NVIDIA driver, no device, or CUDA_VISIBLE_DEVICES empty)");
		else
			snprintf(err, errsize, "there is no gpu:%d: this machine has %d GPU%s (gpu:0%s)", index, n,
				 n == 1 ? "" : "s", n == 1 ? "" : " and up");
		return -1;
	}
	return 0;
}

/* ---- pinned host memory ---- */

/* Each host buffer starts with this header, 64 bytes before the data. */
#define HOST_HEAD 64
#define HOST_PINNED 0x50494e4e /* "PINN" */
#define HOST_PLAIN 0x504c4149  /* "PLAI" */

float *dt_host_alloc_pinned(int64_t n)
{
	size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float) + HOST_HEAD;
	char *p = NULL;
	uint32_t tag = HOST_PINNED;

	/* Only when the backend is already in: a CPU-only run never loads it for this. */
	if (__atomic_load_n(&api, __ATOMIC_ACQUIRE) && api->device_count() > 0)
		p = api->host_alloc(bytes);
	if (!p) {
		tag = HOST_PLAIN;
		p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
		if (!p)
			DT_BUG("out of memory allocating %zu bytes", bytes);
	}
	memset(p, 0, bytes);
	memcpy(p, &tag, sizeof(tag));
	return (float *)(p + HOST_HEAD);
}

void dt_host_free_pinned(float *data)
{
	char *p;
	uint32_t tag;
	if (!data)
		return;
	p = (char *)data - HOST_HEAD;
	memcpy(&tag, p, sizeof(tag));
	if (tag == HOST_PINNED)
		api->host_free(p);
	else if (tag == HOST_PLAIN)
		free(p);
	else
		DT_BUG("dt_host_free_pinned of a pointer it did not allocate");
}

/* ---- precision ---- */

int dt_set_precision(enum dt_precision p, char *err, size_t errsize)
{
	if (p == DT_PRECISION_FP32) {
		if (api)
			return api->set_precision(p, err, errsize);
		return 0;
	}
	if (!dt_cuda() || dt_cuda_device_count() == 0) {
		snprintf(err, errsize, "precision '%s' needs a GPU with the CUDA backend (%s)", dt_precision_names[p],
			 dt_cuda() ? "no GPU found" : why);
		return -1;
	}
	return api->set_precision(p, err, errsize);
}
