#include <math.h>

#include "core/rng.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t dt_hash64(uint64_t a, uint64_t b)
{
	uint64_t x = a ^ (b * 0xd1342543de82ef95ull);
	splitmix64(&x);
	return splitmix64(&x);
}

void dt_rng_seed(struct dt_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = dt_hash64(seed, stream);
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t dt_rng_next(struct dt_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double dt_rng_uniform(struct dt_rng *r) { return (double)(dt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double dt_rng_normal(struct dt_rng *r)
{
	double u1 = dt_rng_uniform(r), u2 = dt_rng_uniform(r);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t dt_rng_below(struct dt_rng *r, uint64_t n)
{
	/* Lemire's unbiased multiply-shift with rejection. */
	unsigned __int128 m = (unsigned __int128)dt_rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (low < n) {
		uint64_t t = -n % n;
		while (low < t) {
			m = (unsigned __int128)dt_rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}
