// The math libraries' own thread pools, kept at one thread: the engine's pool
// (engine/core/thread_pool.h) calls them from each of its threads on that thread's share of the
// work, so they never start a second pool that would fight the engine's threads for the rank's
// cores (performance-facts.md: two pools on two cores ran 1.7-3x slower than one thread).
#pragma once

namespace dltune::engine {

// OpenBLAS to one thread (its idle workers ended), and OpenMP (oneDNN's runtime) to one thread
// in the calling thread; oneDNN's process-wide state set up once. Idempotent; call before the
// first product (and before measuring a training's memory: engine/train/training_memory.h).
void use_engine_threads_for_libraries();

// Says once per process, at INFO, how this CPU runs bf16 (its bf16 instructions through oneDNN,
// or the engine's fallback: bf16-rounded inputs with fp32 multiply-adds).
void log_bf16_path_once();

}  // namespace dltune::engine
