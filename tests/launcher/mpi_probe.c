/* An Open MPI program for the launcher tests and bench/launch: MPI_Init, MPI_Comm_size
 * checked against the expected size (argv[1], optional), MPI_Allreduce of (rank + 1),
 * MPI_Finalize. Prints "mpi rank=R size=S sum=X" on rank 0; exits 3 on a wrong size or sum
 * (a rank that silently ran as a singleton sees size 1). With a second argument "abort", the
 * last rank calls MPI_Abort(7) after the allreduce while the others wait in a barrier. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int expected = argc > 1 ? atoi(argv[1]) : size;
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (argc > 2 && strcmp(argv[2], "abort") == 0) {
    if (rank == size - 1) MPI_Abort(MPI_COMM_WORLD, 7);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  const long want = (long)size * (size + 1) / 2;
  int rc = 0;
  if (size != expected || sum != want) {
    fprintf(stderr, "mpi rank=%d: size=%d (expected %d) sum=%ld (expected %ld)\n", rank, size,
            expected, sum, want);
    rc = 3;
  }
  if (rank == 0) {
    printf("mpi rank=%d size=%d sum=%ld\n", rank, size, sum);
    fflush(stdout);
  }
  MPI_Finalize();
  return rc;
}
