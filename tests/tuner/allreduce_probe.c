/* allreduce_probe: tells which allreduce algorithm Open MPI ran, from the outside.
 *
 * Usage: allreduce_probe COUNT   (COUNT doubles, summed with a user-defined commutative op)
 * Prints one line per rank: "rank R calls C elems E ok|wrong". The op records how often it is
 * called and on how many elements, which differs between algorithms at 2 ranks:
 *   recursive_doubling: both ranks reduce COUNT elements once;
 *   ring / segmented_ring / rabenseifner: both ranks reduce COUNT/2;
 *   basic_linear / nonoverlapping: only rank 0 reduces (COUNT), rank 1 none. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int g_calls = 0;
static long g_elems = 0;

static void sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  g_calls++;
  g_elems += *len;
  for (int i = 0; i < *len; ++i) ((double*)inout)[i] += ((double*)in)[i];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int count = argc > 1 ? atoi(argv[1]) : 1024;
  double* a = malloc(sizeof(double) * (size_t)count);
  double* b = malloc(sizeof(double) * (size_t)count);
  for (int i = 0; i < count; ++i) a[i] = rank + 1;
  MPI_Op op;
  MPI_Op_create(sum, 1, &op);
  MPI_Allreduce(a, b, count, MPI_DOUBLE, op, MPI_COMM_WORLD);
  const double want = size * (size + 1) / 2.0;
  int ok = 1;
  for (int i = 0; i < count; ++i) ok &= b[i] == want;
  printf("rank %d calls %d elems %ld %s\n", rank, g_calls, g_elems, ok ? "ok" : "wrong");
  MPI_Op_free(&op);
  free(a);
  free(b);
  MPI_Finalize();
  return ok ? 0 : 1;
}
