// tokens data: llm.c's GPT-2 token shards, memory-mapped (engine/data/real_data.h).
#include <algorithm>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/real_data.h"

namespace dltune::engine {
namespace {

// A read-only mapping of a whole file.
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_error("cannot open token shard '" + path + "'");
    struct stat st {};
    auto m = std::make_unique<MappedFile>();
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      m->size_ = static_cast<size_t>(st.st_size);
      void* p = mmap(nullptr, m->size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) m->data_ = p;
    }
    ::close(fd);
    if (m->data_ == nullptr) return errno_error("cannot map token shard '" + path + "'");
    return m;
  }
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

class TokenReader final : public SampleReader {
 public:
  TokenReader(std::vector<recipes::TokenShard> shards, std::vector<recipes::TokenSplit::Part> parts,
              int64_t context)
      : shards_(std::move(shards)), parts_(std::move(parts)), context_(context) {
    int64_t at = 0;
    for (const auto& p : parts_) {
      starts_.push_back(at);
      at += p.count;
    }
  }
  Status map() {
    files_.resize(shards_.size());
    for (const auto& p : parts_) {
      if (files_[p.shard]) continue;
      auto f = MappedFile::open(shards_[p.shard].path);
      if (!f) return f.error();
      // read_token_shard() checked the size; a shard changed since then would read past it.
      const auto want =
          static_cast<size_t>(recipes::kTokenShardHeaderBytes + 2 * shards_[p.shard].tokens);
      if ((*f)->size() != want)
        return invalid_input("token shard '" + shards_[p.shard].path +
                             "' changed size while being opened");
      files_[p.shard] = std::move(*f);
    }
    return ok_status();
  }

  // Window `index`: tokens [w T, w T + T] of its shard; x the first T, y the last T.
  Status read(int64_t index, uint64_t, float* x, int32_t* y) const override {
    const size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), index) -
                                         starts_.begin() - 1);
    const recipes::TokenSplit::Part& p = parts_[k];
    const int64_t window = p.first + (index - starts_[k]);
    const int64_t at = window * context_;  // the window's first token in the shard
    const unsigned char* base = files_[p.shard]->bytes() + recipes::kTokenShardHeaderBytes + 2 * at;
    for (int64_t t = 0; t <= context_; ++t) {
      uint16_t tok;
      std::memcpy(&tok, base + 2 * t, 2);  // little-endian, as llm.c writes it
      if (tok >= recipes::kGpt2Vocab)
        return invalid_input("token shard '" + shards_[p.shard].path + "' holds token id " +
                             std::to_string(tok) + " at token " + std::to_string(at + t) +
                             ", beyond GPT-2's vocabulary of 50257: not GPT-2 tokens");
      if (x && t < context_) x[t] = static_cast<float>(tok);
      if (y && t > 0) y[t - 1] = tok;
    }
    return ok_status();
  }

 private:
  std::vector<recipes::TokenShard> shards_;
  std::vector<recipes::TokenSplit::Part> parts_;
  std::vector<int64_t> starts_;  // each part's first sample
  int64_t context_ = 0;
  std::vector<std::unique_ptr<MappedFile>> files_;
};

}  // namespace

Result<Dataset> load_tokens(const std::string& glob, bool train, const recipes::Shape& shape,
                            double heldout_fraction) {
  if (shape.size() != 1 || shape[0] < 1)
    return invalid_input("tokens data needs a model input of (context), got " +
                         recipes::describe_shape(shape));
  const int64_t context = shape[0];
  auto shards = recipes::token_shards(glob);
  if (!shards) return shards.error();
  auto split = recipes::split_tokens(*shards, context, heldout_fraction <= 0.0, heldout_fraction);
  if (!split) return split.error();
  Dataset d;
  d.name = train ? "tokens" : "tokens (held out)";
  d.shape = shape;
  d.classes = static_cast<int>(recipes::kGpt2Vocab);
  d.label_width = context;
  d.size = train ? split->train_windows : split->heldout_windows;
  auto reader = std::make_shared<TokenReader>(std::move(*shards),
                                              train ? split->train : split->heldout, context);
  DLTUNE_TRY(reader->map());
  d.reader = std::move(reader);
  return d;
}

}  // namespace dltune::engine
