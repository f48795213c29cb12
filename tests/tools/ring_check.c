/*
 * ring_check: under mpirun, the gradient sum's ring (strategies/mpi_coll.h).
 * Parts of 1 to 65,537 floats (fewer floats than ranks among them) are started
 * one after another, the earlier ones progressed in between, then waited for,
 * in two rounds (the same indices again, as at every training step):
 * - small integers, whose sum is exact: every value is checked;
 * - random floats of several magnitudes: every rank must hold the same bits
 *   (rank 0's, broadcast), close to MPI_Allreduce's sum (as rounding allows).
 * Rank 0 prints "ring_check: P ranks, N parts: same"; exit 0, or 1 naming the
 * first wrong value.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "strategies/mpi_coll.h"

static const int64_t sizes[] = { 1, 2, 3, 5, 17, 1000, 65537 };
#define NPARTS ((int)(sizeof(sizes) / sizeof(sizes[0])))

/* A value of rank r, element i of part j: an integer in [-6, 6], or a float of magnitude up to 1e3. */
static float value(int exact, int r, int64_t i, int j)
{
	uint64_t h = ((uint64_t)r * 1000003u + (uint64_t)i) * 2654435761u + (uint64_t)j * 40503u;
	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	if (exact)
		return (float)((int)(h % 13) - 6);
	return (float)((double)(h % 2000001) / 1e6 - 1.0) * powf(10.0f, (float)((h >> 32) % 7) - 3.0f);
}

int main(void)
{
	struct dt_mpi_group g;
	struct dt_mpi_ring rings[NPARTS];
	float *v[NPARTS], *tmp[NPARTS];
	int rank, world, bad = 0;

	if (dt_mpi_start(&rank, &world) < 0)
		return 2;
	dt_mpi_group_init(&g, MPI_COMM_WORLD, 60, "ring_check");
	for (int j = 0; j < NPARTS; j++) {
		v[j] = dt_malloc((size_t)sizes[j] * sizeof(float));
		tmp[j] = dt_malloc((size_t)dt_mpi_ring_chunk(&g, sizes[j]) * sizeof(float));
	}
	for (int round = 0; round < 4 && !bad; round++) {
		int exact = round < 2;
		for (int j = 0; j < NPARTS; j++) {
			for (int64_t i = 0; i < sizes[j]; i++)
				v[j][i] = value(exact, rank, i, j + round);
			dt_mpi_ring_start(&g, &rings[j], j, v[j], sizes[j], tmp[j]);
			dt_mpi_ring_progress(&g, rings, j + 1);
		}
		dt_mpi_ring_wait(&g, rings, NPARTS, "the ring check", round);
		for (int j = 0; j < NPARTS && !bad; j++) {
			float *want = dt_malloc((size_t)sizes[j] * sizeof(float));
			float *first = dt_malloc((size_t)sizes[j] * sizeof(float));
			double *mag = dt_malloc((size_t)sizes[j] * sizeof(double)); /* the sum of the values' magnitudes */
			for (int64_t i = 0; i < sizes[j]; i++) {
				want[i] = 0;
				mag[i] = 0;
				for (int r = 0; r < world; r++) {
					want[i] += value(exact, r, i, j + round);
					mag[i] += fabs(value(exact, r, i, j + round));
				}
			}
			if (!exact) {
				for (int64_t i = 0; i < sizes[j]; i++)
					want[i] = value(exact, rank, i, j + round);
				MPI_Allreduce(MPI_IN_PLACE, want, (int)sizes[j], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				memcpy(first, v[j], (size_t)sizes[j] * sizeof(float));
				MPI_Bcast(first, (int)sizes[j], MPI_FLOAT, 0, MPI_COMM_WORLD);
			}
			for (int64_t i = 0; i < sizes[j] && !bad; i++) {
				/* Summed in another order, each of world - 1 additions rounds by up to 2^-24 of the magnitudes. */
				if (exact ? v[j][i] != want[i] : fabs(v[j][i] - want[i]) > 1e-6 * world * mag[i]) {
					fprintf(stderr, "ring_check: rank %d, round %d, part %d (%lld floats), element %lld: %.9g, "
						"expected %.9g\n", rank, round, j, (long long)sizes[j], (long long)i,
						v[j][i], want[i]);
					bad = 1;
				} else if (!exact && memcmp(&v[j][i], &first[i], sizeof(float))) {
					fprintf(stderr, "ring_check: rank %d, round %d, part %d, element %lld: %.9g where rank 0 "
						"has %.9g\n", rank, round, j, (long long)i, v[j][i], first[i]);
					bad = 1;
				}
			}
			free(want);
			free(first);
			free(mag);
		}
		MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	}
	if (rank == 0 && !bad)
		printf("ring_check: %d ranks, %d parts: same\n", world, NPARTS);
	for (int j = 0; j < NPARTS; j++) {
		free(v[j]);
		free(tmp[j]);
	}
	dt_mpi_group_release(&g);
	dt_mpi_stop();
	return bad;
}
