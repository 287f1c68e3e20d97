// `dltune data check`: files checked against their published form, with files made here
// (sparse: their pixels are zeros) rather than downloads.
#include "launcher/cli/data_check.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace dltune::launcher {
namespace {

namespace fs = std::filesystem;

// A file of `bytes` bytes starting with `head` (the rest zeros, sparse).
void make(const fs::path& p, const std::string& head, uint64_t bytes) {
  {
    std::ofstream f(p, std::ios::binary);
    f.write(head.data(), static_cast<std::streamsize>(head.size()));
  }
  fs::resize_file(p, bytes);
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

class DataCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune-datacheck-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DataCheckTest, MnistFilesAsPublished) {
  make(dir_ / "train-images-idx3-ubyte", be32(0x803) + be32(60000) + be32(28) + be32(28), 47040016);
  make(dir_ / "train-labels-idx1-ubyte", be32(0x801) + be32(60000), 60008);
  recipes::DataConfig data;
  data.kind = recipes::DataKind::kMnist;
  data.path = dir_.string();
  DataCheck d = check_data(data);
  EXPECT_TRUE(d.ok) << d.summary;
  ASSERT_EQ(d.files.size(), 2u);
  EXPECT_EQ(d.files[0].detail, "60,000 images of 28 x 28");
  EXPECT_EQ(d.files[1].detail, "60,000 labels, all 0-9");
  EXPECT_NE(d.summary.find("MNIST: 2 of 2 files ok"), std::string::npos) << d.summary;
  // With heldout: test the test files are needed too: missing, with what to fetch.
  data.heldout_test_files = true;
  d = check_data(data);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.files[2].detail, "missing");
  EXPECT_NE(d.fetch.find("ossci-datasets"), std::string::npos) << d.fetch;
}

TEST_F(DataCheckTest, WrongFilesAreNamedWithWhatIsWrong) {
  // Still gzip-compressed.
  make(dir_ / "train-images-idx3-ubyte", "\x1f\x8b\x08", 47040016);
  EXPECT_NE(check_idx((dir_ / "train-images-idx3-ubyte").string(), true, 47040016)
                .detail.find("still gzip-compressed? gunzip it"),
            std::string::npos);
  // Truncated.
  make(dir_ / "short", be32(0x803) + be32(60000) + be32(28) + be32(28), 1000);
  EXPECT_NE(check_idx((dir_ / "short").string(), true, 47040016)
                .detail.find("1,000 bytes, not the "
                             "47,040,016"),
            std::string::npos);
  // A label out of range.
  make(dir_ / "labels", be32(0x801) + be32(3) + std::string("\x01\x0c\x02", 3), 11);
  const FileCheck l = check_idx((dir_ / "labels").string(), false, 0);
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.detail.find("label 12 at index 1"), std::string::npos) << l.detail;
}

TEST_F(DataCheckTest, CifarBatchesAndTheirArchivesChecksum) {
  for (int i = 1; i <= 5; ++i)
    make(dir_ / ("data_batch_" + std::to_string(i) + ".bin"), "", 30730000);
  recipes::DataConfig data;
  data.kind = recipes::DataKind::kCifar10;
  data.path = dir_.string();
  DataCheck d = check_data(data);
  EXPECT_TRUE(d.ok) << d.summary;
  EXPECT_EQ(d.files[0].detail, "10,000 images of 3 x 32 x 32, labels 0-9");
  // An archive beside them whose MD5 is not the published one.
  make(dir_ / "cifar-10-binary.tar.gz", "not the archive", 15);
  d = check_data(data);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.files.back().detail.find("not the published c32a1d4ab5d03f1284b67883e8d87530"),
            std::string::npos)
      << d.files.back().detail;
  EXPECT_NE(d.summary.find("0 of 1 archives match"), std::string::npos) << d.summary;
  // A record whose label is not a class.
  fs::remove(dir_ / "cifar-10-binary.tar.gz");
  make(dir_ / "data_batch_3.bin", std::string(3073, '\0') + "\x0b", 30730000);
  d = check_data(data);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.files[2].detail.find("record 1 has label 11"), std::string::npos)
      << d.files[2].detail;
}

TEST_F(DataCheckTest, SyntheticAndTextData) {
  recipes::DataConfig synth;
  synth.kind = recipes::DataKind::kSyntheticCifar;
  EXPECT_TRUE(check_data(synth).ok);
  EXPECT_NE(check_data(synth).summary.find("nothing to fetch"), std::string::npos);
  recipes::DataConfig text;
  text.kind = recipes::DataKind::kText;
  text.context = 16;
  text.heldout_fraction = 0.1;
  text.path = (dir_ / "t.txt").string();
  EXPECT_FALSE(check_data(text).ok);
  std::ofstream(text.path) << std::string(1000, 'a') + "bcd";
  const DataCheck d = check_data(text);
  EXPECT_TRUE(d.ok) << d.files[0].detail;
  EXPECT_NE(d.files[0].detail.find("1,003 bytes"), std::string::npos) << d.files[0].detail;
  EXPECT_NE(d.files[0].detail.find("unigram entropy"), std::string::npos) << d.files[0].detail;
}

}  // namespace
}  // namespace dltune::launcher
