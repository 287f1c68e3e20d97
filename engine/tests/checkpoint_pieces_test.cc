// Reading pieces of a checkpoint without holding it (checkpoint.h read_checkpoint_pieces): the
// pieces, wherever they fall against the 1 MiB read chunks and the parts' boundaries, equal the
// same floats of load_checkpoint(); a piece outside its part is refused before anything is
// read; a corrupt payload is reported; a file written by CheckpointStream (padded header) reads
// alike.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/paths.h"
#include "engine/io/checkpoint.h"
#include "engine/io/checkpoint_stream.h"

namespace dltune::engine {
namespace {

Checkpoint sample(size_t params, size_t state) {
  Checkpoint ck;
  ck.model = "m";
  ck.step = 7;
  ck.seed = 3;
  ck.global_batch = 64;
  ck.optimizer = "adamw";
  ck.optimizer_steps = 7;
  for (size_t i = 0; i < params; ++i) ck.params.push_back(static_cast<float>(i) * 0.5f);
  ck.slots = {std::vector<float>(params), std::vector<float>(params)};
  for (size_t i = 0; i < params; ++i) {
    ck.slots[0][i] = -static_cast<float>(i);
    ck.slots[1][i] = static_cast<float>(i) + 0.25f;
  }
  for (size_t i = 0; i < state; ++i) ck.state.push_back(1000.0f + static_cast<float>(i));
  return ck;
}

class CheckpointPieces : public ::testing::Test {
 protected:
  void SetUp() override { path_ = "/tmp/dltune-ckpieces-" + std::to_string(getpid()) + ".ckpt"; }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(CheckpointPieces, PiecesEqualTheWholeFilesFloatsAcrossChunks) {
  // 300,000 floats a part: 1.2 MB each, so parts and pieces straddle the 1 MiB chunks.
  const Checkpoint ck = sample(300000, 1000);
  ASSERT_TRUE(save_checkpoint(path_, ck).ok());
  auto info = read_checkpoint_info(path_);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->params, 300000u);
  EXPECT_EQ(info->slots, (std::vector<size_t>{300000, 300000}));
  EXPECT_EQ(info->state, 1000u);
  EXPECT_EQ(info->meta.step, 7);
  EXPECT_TRUE(info->meta.params.empty());
  struct Want {
    size_t part, offset, count;
  };
  const std::vector<Want> wants = {{0, 262000, 1000}, {0, 0, 5},       {1, 0, 300000},
                                   {2, 262143, 2},    {2, 299990, 10}, {3, 0, 1000},
                                   {0, 262000, 1000}, {1, 5, 0}};
  std::vector<std::vector<float>> got(wants.size());
  std::vector<CheckpointPiece> pieces;
  for (size_t i = 0; i < wants.size(); ++i) {
    got[i].assign(wants[i].count, -1.0f);
    pieces.push_back({wants[i].part, wants[i].offset, wants[i].count, got[i].data()});
  }
  ASSERT_TRUE(read_checkpoint_pieces(path_, *info, pieces).ok());
  auto whole = load_checkpoint(path_);
  ASSERT_TRUE(whole.ok()) << whole.error().message();
  EXPECT_EQ(whole->params, ck.params);
  EXPECT_EQ(whole->slots, ck.slots);
  EXPECT_EQ(whole->state, ck.state);
  for (size_t i = 0; i < wants.size(); ++i) {
    const Want& w = wants[i];
    const std::vector<float>& src = w.part == 0   ? ck.params
                                    : w.part == 3 ? ck.state
                                                  : ck.slots[w.part - 1];
    for (size_t k = 0; k < w.count; ++k)
      ASSERT_EQ(got[i][k], src[w.offset + k]) << "piece " << i << " float " << k;
  }

  // A piece past its part's end, or of a part that does not exist: refused, nothing written.
  std::vector<float> out(10, -1.0f);
  for (const CheckpointPiece& bad :
       {CheckpointPiece{3, 995, 10, out.data()}, CheckpointPiece{4, 0, 1, out.data()}}) {
    auto st = read_checkpoint_pieces(path_, *info, {bad});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("outside its part"), std::string::npos);
    EXPECT_EQ(out, std::vector<float>(10, -1.0f));
  }

  // One flipped byte in the last chunk: the checksum says so.
  auto text = paths::read_file(path_);
  ASSERT_TRUE(text.ok());
  (*text)[text->size() - 7] ^= 0x21;
  ASSERT_TRUE(paths::write_file_atomic(path_, *text).ok());
  info = read_checkpoint_info(path_);  // another file now (the header is intact)
  ASSERT_TRUE(info.ok()) << info.error().message();
  auto st = read_checkpoint_pieces(path_, *info, {{0, 0, 5, out.data()}});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("checksum mismatch"), std::string::npos);
}

TEST_F(CheckpointPieces, AStreamedFileReadsAlike) {
  const Checkpoint ck = sample(70000, 3);
  auto s = CheckpointStream::open(path_, ck, 70000, {70000, 70000}, 3);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_TRUE((*s)->write(ck.params).ok());
  for (const auto& slot : ck.slots) ASSERT_TRUE((*s)->write(slot).ok());
  ASSERT_TRUE((*s)->write(ck.state).ok());
  ASSERT_TRUE((*s)->finish().ok());
  auto info = read_checkpoint_info(path_);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->payload_offset, 4096u);
  std::vector<float> mid(3), st(3);
  ASSERT_TRUE(
      read_checkpoint_pieces(path_, *info, {{2, 69997, 3, mid.data()}, {3, 0, 3, st.data()}}).ok());
  EXPECT_EQ(mid, std::vector<float>(ck.slots[1].end() - 3, ck.slots[1].end()));
  EXPECT_EQ(st, ck.state);
}

// A checkpoint written over the one being read (save_checkpoint renames a new file into place):
// the payload is not read from the new file with the old one's header, and load_checkpoint()
// reads the new one whole.
TEST_F(CheckpointPieces, AReplacedFileIsNotReadWithTheOldHeader) {
  Checkpoint first = sample(1000, 10);
  ASSERT_TRUE(save_checkpoint(path_, first).ok());
  auto info = read_checkpoint_info(path_);
  ASSERT_TRUE(info.ok()) << info.error().message();
  Checkpoint second = sample(1000, 10);
  second.step = first.step + 1;
  for (float& p : second.params) p += 1.0f;
  ASSERT_TRUE(save_checkpoint(path_, second).ok());
  std::vector<float> out(1000, -1.0f);
  auto st = read_checkpoint_pieces(path_, *info, {{0, 0, 1000, out.data()}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kIo);
  EXPECT_NE(st.error().message().find("was replaced by another checkpoint"), std::string::npos)
      << st.error().message();
  EXPECT_EQ(out, std::vector<float>(1000, -1.0f));  // nothing read
  auto whole = load_checkpoint(path_);
  ASSERT_TRUE(whole.ok()) << whole.error().message();
  EXPECT_EQ(whole->step, second.step);
  EXPECT_EQ(whole->params, second.params);
}

}  // namespace
}  // namespace dltune::engine
