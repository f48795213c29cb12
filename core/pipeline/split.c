/*
 * Training, validation and test parts of one file: the configuration, the
 * sizes, and the record lists (split.h).
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/pipeline/split.h"
#include "core/rng.h"

#define DT_SPLIT_STREAM 0x73706c6974ull /* "split": the shuffle's random stream, apart from the epochs' */

const char *const dt_split_keys[] = { "shuffle", "stratify", "seed", NULL };

int dt_split_config_read(struct dt_split_config *c, const struct dt_node *data)
{
	const struct dt_node *n = dt_node_get(data, "split");
	int64_t seed;
	int has_seed;

	memset(c, 0, sizeof(*c));
	c->node = n;
	c->test_node = dt_node_get(data, "test_split");
	if (dt_cfg_float(data, "test_split", 0, 0, 0.99, &c->test) < 0)
		return -1;
	if (c->test > 0 && dt_node_get(data, "test"))
		return dt_node_error(c->test_node, "give either 'test' or 'test_split', not both");
	if (!n)
		return 0;
	if (dt_node_expect(n, DT_NODE_MAP, "split") < 0 || dt_cfg_check_keys(n, "split", dt_split_keys) < 0 ||
	    dt_cfg_bool(n, "shuffle", 0, &c->shuffle) < 0 || dt_cfg_bool(n, "stratify", 0, &c->stratify) < 0 ||
	    (has_seed = dt_cfg_int(n, "seed", 0, 0, INT64_MAX, &seed)) < 0)
		return -1;
	c->has_seed = has_seed;
	dt_cfg_no_default(n, "seed"); /* absent: the seed follows fit.seed */
	c->seed = (uint64_t)seed;
	return 0;
}

int64_t dt_split_size(int64_t count, double fraction)
{
	return fraction > 0 ? count - (int64_t)((double)count * (1 - fraction)) : 0;
}

struct share_rank {
	double rest; /* the fraction of a record a group's floor left out */
	int group;
};

static int cmp_rest(const void *a, const void *b)
{
	const struct share_rank *x = a, *y = b;
	if (x->rest != y->rest)
		return x->rest < y->rest ? 1 : -1;
	return x->group - y->group;
}

/*
 * Shares total records among k groups of sizes size[g] (of count in all) in
 * proportion: the floor of each share, then one more each in order of the
 * largest remainder, never more than cap[g]. Into take[g].
 */
static void share(int64_t total, int64_t count, int k, const int64_t *size, const int64_t *cap, int64_t *take)
{
	struct share_rank *rank = dt_malloc((size_t)k * sizeof(*rank));
	int64_t given = 0;
	int more = 1;

	for (int g = 0; g < k; g++) {
		double want = (double)size[g] * (double)total / (double)count;
		take[g] = (int64_t)want;
		if (take[g] > cap[g])
			take[g] = cap[g];
		rank[g] = (struct share_rank){ want - (double)take[g], g };
		given += take[g];
	}
	qsort(rank, (size_t)k, sizeof(*rank), cmp_rest);
	while (given < total && more) {
		more = 0;
		for (int i = 0; i < k && given < total; i++) {
			int g = rank[i].group;
			if (take[g] < cap[g]) {
				take[g]++;
				given++;
				more = 1;
			}
		}
	}
	free(rank);
}

enum { PART_TRAIN, PART_VAL, PART_TEST };

/* part[r] for each record r, with c->stratify: each group's last records of order go to test, then validation. */
static void stratify(uint8_t *part, const int64_t *order, int64_t count, int64_t nval, int64_t ntest,
		     const int32_t *labels, int nclasses)
{
	int k = nclasses + 1; /* group nclasses: unreadable records */
	int64_t *size = dt_calloc(k, sizeof(int64_t)), *cap = dt_calloc(k, sizeof(int64_t));
	int64_t *test = dt_calloc(k, sizeof(int64_t)), *val = dt_calloc(k, sizeof(int64_t));

	for (int64_t r = 0; r < count; r++)
		size[labels[r] >= 0 && labels[r] < nclasses ? labels[r] : nclasses]++;
	for (int g = 0; g < k; g++)
		cap[g] = size[g] > 0 ? size[g] - 1 : 0;
	share(ntest, count, k, size, cap, test);
	for (int g = 0; g < k; g++)
		cap[g] -= test[g];
	share(nval, count, k, size, cap, val);
	for (int64_t i = count - 1; i >= 0; i--) {
		int64_t r = order[i];
		int g = labels[r] >= 0 && labels[r] < nclasses ? labels[r] : nclasses;
		if (test[g] > 0) {
			part[r] = PART_TEST;
			test[g]--;
		} else if (val[g] > 0) {
			part[r] = PART_VAL;
			val[g]--;
		}
	}
	free(size);
	free(cap);
	free(test);
	free(val);
}

/* The records of part p, in increasing order, into *list (NULL when none). */
static int64_t collect(const uint8_t *part, int64_t count, int p, int64_t **list)
{
	int64_t n = 0;
	for (int64_t r = 0; r < count; r++)
		n += part[r] == p;
	*list = n ? dt_malloc((size_t)n * sizeof(int64_t)) : NULL;
	n = 0;
	for (int64_t r = 0; r < count; r++)
		if (part[r] == p)
			(*list)[n++] = r;
	return n;
}

void dt_split_records(struct dt_split *s, int64_t count, int64_t nval, int64_t ntest, const struct dt_split_config *c,
		      uint64_t seed, const int32_t *labels, int nclasses)
{
	int64_t *order = dt_malloc((size_t)count * sizeof(int64_t));
	uint8_t *part = dt_calloc(count, 1);
	struct dt_rng r;

	DT_ASSERT(nval >= 0 && ntest >= 0 && nval + ntest < count);
	memset(s, 0, sizeof(*s));
	for (int64_t i = 0; i < count; i++)
		order[i] = i;
	if (c->shuffle) {
		dt_rng_seed(&r, seed, DT_SPLIT_STREAM);
		for (int64_t i = count - 1; i > 0; i--) {
			int64_t j = (int64_t)dt_rng_below(&r, (uint64_t)i + 1);
			int64_t t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
	}
	/* Nothing to cut leaves stratify moot, and the caller reads no labels for it. */
	if (c->stratify && nval + ntest > 0) {
		stratify(part, order, count, nval, ntest, labels, nclasses);
	} else {
		for (int64_t i = count - ntest - nval; i < count; i++)
			part[order[i]] = i < count - ntest ? PART_VAL : PART_TEST;
	}
	s->ntrain = collect(part, count, PART_TRAIN, &s->train);
	s->nval = collect(part, count, PART_VAL, &s->val);
	s->ntest = collect(part, count, PART_TEST, &s->test);
	free(order);
	free(part);
}

void dt_split_release(struct dt_split *s)
{
	free(s->train);
	free(s->val);
	free(s->test);
	memset(s, 0, sizeof(*s));
}
