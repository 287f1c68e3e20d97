/* mpich_colls: calls MPI collectives of every family MPICH selects an algorithm for, on
 * MPI_COMM_WORLD and on an inter-communicator, at a small and a large message size, and checks
 * the results. Built with MPICH's mpicc by tests/tuner/mpich_rules_test.sh, which runs it with
 * dltune's selection file: MPICH asserts when a collective finds no algorithm in the file.
 * Prints "mpich colls ok size=N" on rank 0; exits 3 on a wrong result. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int g_bad = 0;
#define CHECK(cond, what)                                               \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "mpich_colls: %s wrong (rank %d)\n", what, rank); \
      g_bad = 1;                                                        \
    }                                                                   \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int counts[2] = {2, 1 << 16};
  for (int c = 0; c < 2; ++c) {
    const int n = counts[c];
    double* a = malloc(sizeof(double) * (size_t)n * (size_t)size);
    double* b = malloc(sizeof(double) * (size_t)n * (size_t)size);
    for (int i = 0; i < n; ++i) a[i] = rank + 1;
    MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(b[n - 1] == size * (size + 1) / 2.0, "allreduce");
    for (int i = 0; i < n; ++i) b[i] = rank == 0 ? 42 : 0;
    MPI_Bcast(b, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    CHECK(b[n - 1] == 42, "bcast");
    MPI_Allgather(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, MPI_COMM_WORLD);
    CHECK(b[(size_t)n * (size - 1)] == size, "allgather");
    MPI_Reduce(a, b, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) CHECK(b[0] == size * (size + 1) / 2.0, "reduce");
    MPI_Request req;
    MPI_Iallreduce(a, b, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(b[0] == size, "iallreduce");
    free(a);
    free(b);
  }
  int one = rank, all[64] = {0}, sum = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Alltoall(all, 1, MPI_INT, all + 32, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Gather(&one, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Scatter(all, 1, MPI_INT, &one, 1, MPI_INT, 0, MPI_COMM_WORLD);
  CHECK(one == rank, "gather+scatter");
  MPI_Scan(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == rank * (rank + 1) / 2, "scan");
  /* Two halves joined by an inter-communicator (comm_type=inter). */
  if (size >= 2) {
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
    int v = rank + 1, got = 0;
    MPI_Allreduce(&v, &got, 1, MPI_INT, MPI_SUM, inter);
    CHECK(got > 0, "inter allreduce");
    MPI_Barrier(inter);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
  if (rank == 0 && !g_bad) printf("mpich colls ok size=%d\n", size);
  MPI_Finalize();
  return g_bad ? 3 : 0;
}
