// Background checkpoints (checkpoint_writer.h): the file holds the state as it was when start()
// returned, whatever training does to its buffers afterwards; one write at a time; a failed
// write is reported, and nothing more is started; a process killed while writing leaves the
// previous checkpoint whole and loadable.
#include "engine/io/checkpoint_writer.h"

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "engine/tests/temp_dir.h"

namespace dltune::engine {
namespace {

using test_support::TempDir;

Checkpoint header(int64_t step) {
  Checkpoint ck;
  ck.model = "m";
  ck.step = step;
  ck.seed = 5;
  ck.global_batch = 32;
  ck.optimizer = "sgd";
  ck.optimizer_steps = step;
  return ck;
}

std::vector<float> ramp(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

TEST(CheckpointWriter, TheFileHoldsTheStateAsItWasAtStart) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/ck.bin";
  std::vector<float> params = ramp(300000, 1.0f), velocity = ramp(300000, -7.0f);
  std::vector<float> state = ramp(100, 0.5f);
  CheckpointWriter w;
  ASSERT_TRUE(w.start(path, header(10), params, {velocity}, state).ok());
  // Training goes on at once: the next steps change every buffer.
  const std::vector<float> p10 = params, v10 = velocity, s10 = state;
  for (float& x : params) x = -x;
  for (float& x : velocity) x = 0.0f;
  state.assign(state.size(), 9.0f);
  ASSERT_TRUE(w.wait().ok());
  EXPECT_FALSE(w.busy());
  auto ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.error().message();
  EXPECT_EQ(ck->step, 10);
  EXPECT_EQ(ck->params, p10);
  ASSERT_EQ(ck->slots.size(), 1u);
  EXPECT_EQ(ck->slots[0], v10);
  EXPECT_EQ(ck->state, s10);
  EXPECT_EQ(w.snapshot_bytes(), static_cast<int64_t>((2 * 300000 + 100) * sizeof(float)));
  EXPECT_EQ(w.writes(), 1);
  EXPECT_GT(w.write_s(), 0.0);
  // The next checkpoint replaces it; start() waits for a write still in flight first.
  ASSERT_TRUE(w.start(path, header(20), params, {velocity}, state).ok());
  ASSERT_TRUE(w.start(path, header(30), params, {velocity}, state).ok());
  ASSERT_TRUE(w.wait().ok());
  ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.error().message();
  EXPECT_EQ(ck->step, 30);
  EXPECT_EQ(ck->params, params);
  EXPECT_EQ(w.writes(), 3);
}

TEST(CheckpointWriter, AFailedWriteIsReportedAndStopsTheNext) {
  const std::vector<float> params = ramp(10, 0.0f);
  CheckpointWriter w;
  const std::string nowhere = "/nonexistent-dltune-dir/ck.bin";
  ASSERT_TRUE(w.start(nowhere, header(1), params, {}, {}).ok());  // fails in the background
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/ck.bin";
  Status next = w.start(path, header(2), params, {}, {});
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.error().kind(), ErrorKind::kIo);
  EXPECT_NE(next.error().message().find("/nonexistent-dltune-dir/ck.bin"), std::string::npos)
      << next.error().message();
  EXPECT_FALSE(paths::exists(path));  // nothing new was started
  EXPECT_TRUE(w.wait().ok());         // the error is reported once
  ASSERT_TRUE(w.start(path, header(3), params, {}, {}).ok());
  EXPECT_TRUE(w.wait().ok());
  EXPECT_TRUE(load_checkpoint(path).ok());
}

// A pipeline's rank 0 (finish_in_background): the payload streamed into the file unhashed, then
// hashed from the file, synced and renamed by the thread; load_checkpoint() verifies the hash
// against the payload it reads, and the previous checkpoint stays in place until the rename.
TEST(CheckpointWriter, AStreamFinishedInTheBackgroundLoadsWhole) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/ck.bin";
  const std::vector<float> small = ramp(10, 3.0f);
  ASSERT_TRUE(save_checkpoint(path, header(5), small, {small}, {}).ok());
  // More than the 4 MiB read-back piece, so that the hash spans several reads.
  const std::vector<float> params = ramp(1500000, 1.0f), slot = ramp(1500000, -2.0f);
  const std::vector<float> state = ramp(7, 0.25f);
  auto stream = CheckpointStream::open(path, header(10), params.size(), {slot.size()}, state.size(),
                                       /*hash_at_finish=*/true);
  ASSERT_TRUE(stream.ok()) << stream.error().message();
  ASSERT_TRUE((*stream)->write({params.data(), 1000}).ok());
  ASSERT_TRUE((*stream)->write({params.data() + 1000, params.size() - 1000}).ok());
  ASSERT_TRUE((*stream)->write(slot).ok());
  ASSERT_TRUE((*stream)->write(state).ok());
  auto before = load_checkpoint(path);  // written, not yet finished: the previous one
  ASSERT_TRUE(before.ok()) << before.error().message();
  EXPECT_EQ(before->step, 5);
  CheckpointWriter w;
  // Step 10's write waits 500 ms before its rename (the tests' fault hook), so that what a
  // reader sees meanwhile, and a second finish, can be checked.
  setenv("DLTUNE_FAULT_CHECKPOINT_STALL_MS", "10:500", 1);
  ASSERT_TRUE(w.finish_in_background(std::move(*stream)).ok());
  EXPECT_TRUE(w.busy());
  auto meanwhile = load_checkpoint(path);
  ASSERT_TRUE(meanwhile.ok()) << meanwhile.error().message();
  EXPECT_EQ(meanwhile->step, 5);
  // One write at a time: a second stream is refused until wait() (its file is the same).
  auto second = CheckpointStream::open(dir.path + "/other.bin", header(11), 1, {}, 0);
  ASSERT_TRUE(second.ok());
  Status refused = w.finish_in_background(std::move(*second));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind(), ErrorKind::kInternal);
  ASSERT_TRUE(w.wait().ok());
  unsetenv("DLTUNE_FAULT_CHECKPOINT_STALL_MS");
  EXPECT_FALSE(paths::exists(dir.path + "/other.bin"));
  auto ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.error().message();
  EXPECT_EQ(ck->step, 10);
  EXPECT_EQ(ck->params, params);
  ASSERT_EQ(ck->slots.size(), 1u);
  EXPECT_EQ(ck->slots[0], slot);
  EXPECT_EQ(ck->state, state);
  EXPECT_EQ(w.writes(), 1);
  EXPECT_GT(w.write_s(), 0.4);  // the hash, sync and stall were the thread's
}

// A rank killed (SIGKILL) while its background write is under way: the checkpoint before it
// loads whole, as if the write had never begun.
TEST(CheckpointWriter, AProcessKilledWhileWritingLeavesThePreviousCheckpoint) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::string path = dir.path + "/ck.bin";
  const std::vector<float> small = ramp(1000, 3.0f);
  ASSERT_TRUE(save_checkpoint(path, header(5), small, {small}, {}).ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // 32 Mi floats x 2 (128 MiB each): the write takes long enough to be caught in the middle,
    // its temporary file (paths::write_file_atomic: PATH.tmp.PID) created and growing.
    std::vector<float> big(size_t{32} << 20, 1.0f);
    CheckpointWriter w;
    if (!w.start(path, header(6), big, {big}, {}).ok()) _exit(3);
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    for (int i = 0; i < 20000 && !paths::exists(tmp); ++i) usleep(500);
    raise(SIGKILL);
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  // It was killed while writing: the temporary file is there, part-written.
  const std::string tmp = path + ".tmp." + std::to_string(pid);
  EXPECT_TRUE(paths::exists(tmp)) << "the write was not under way when the process died";
  auto ck = load_checkpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.error().message();
  EXPECT_EQ(ck->step, 5);
  EXPECT_EQ(ck->params, small);
}

}  // namespace
}  // namespace dltune::engine
