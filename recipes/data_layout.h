// The layout of the real datasets a recipe may point at, read from the file system without
// decoding anything: folders of class folders of images (torchvision's ImageFolder, ImageNet's
// layout) and llm.c's pre-tokenized shards. One reading of each layout, shared by the recipe
// parser (the class count), the tuner and the engine (sample counts, the files to read) and
// `dltune data check`.
//
// imagefolder DIR: the training images are DIR/train when that is a directory, else DIR
// itself. Classes are the sorted names of the root's subdirectories (byte order, as Python
// sorts str); a class's samples are its files with an image extension, found as torchvision
// 0.14's make_dataset finds them: os.walk of the class folder (following links) in sorted
// order of the directories, then sorted file names. Labels are class indices. The held-out
// images are DIR/val (when DIR/train and DIR/val are both directories), whose class folders
// must be among the training classes and take their indices; else a share of the training
// images chosen by a seeded shuffle (as mnist's `heldout: 0.1`).
//
// tokens GLOB: llm.c's .bin shards (dev/data/data_common.py): a header of 256 little-endian
// int32 (magic 20240520, version 1, token count), then that many uint16 GPT-2 token ids. The
// glob's matches, sorted by name, are read in that order; a shard of n tokens gives
// (n - 1) / T samples of T tokens (inputs at i*T .. i*T+T-1, targets one further), so the
// windows of a shard never overlap. Held out: the last shard when there are several (llm.c
// names its splits *_train*.bin and *_val*.bin, which sort val last), else the last share of
// the windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "recipes/recipe.h"

namespace dltune::recipes {

// --- imagefolder -----------------------------------------------------------------------------

// How a file's extension classifies it (case-insensitive): JPEG (.jpg, .jpeg), PNG (.png), an
// image format torchvision reads that dltune does not (.ppm .bmp .pgm .tif .tiff .webp), or
// not an image (skipped, as torchvision skips it).
enum class ImageExt { kJpeg, kPng, kUnsupported, kNotImage };
ImageExt image_ext(const std::string& name);

struct ImageEntry {
  std::string path;
  int32_t label = 0;
};

struct ImageFolderIndex {
  std::string root;                      // the folder whose subfolders are the classes
  std::vector<std::string> classes;      // sorted
  std::vector<ImageEntry> images;        // class by class, in torchvision's order
  std::vector<int64_t> per_class;        // images of each class
  std::vector<std::string> unsupported;  // image files dltune cannot decode (by extension)
  std::vector<std::string> skipped;      // files that are not images (torchvision skips them)
};

// DIR/train when it is a directory, else DIR.
std::string imagefolder_train_root(const std::string& dir);
// DIR/val when DIR/train and DIR/val are both directories, else "".
std::string imagefolder_val_root(const std::string& dir);
// The sorted class folder names under `root`. Errors: not a directory (not_found), no
// subdirectory (invalid_input, saying what the layout must be).
Result<std::vector<std::string>> imagefolder_classes(const std::string& root);
// Every image of `root`'s class folders. `classes`: the class names to index by (a held-out
// folder uses the training classes; a folder of `root` that is not among them is an error);
// null: root's own. Errors: those of imagefolder_classes, a class with no image (invalid_input:
// torchvision refuses it too), an unreadable directory (io_error).
Result<ImageFolderIndex> index_imagefolder(const std::string& root,
                                           const std::vector<std::string>* classes = nullptr);

// --- tokens ----------------------------------------------------------------------------------

inline constexpr int32_t kTokenShardMagic = 20240520;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderBytes = 256 * 4;
inline constexpr int64_t kGpt2Vocab = 50257;

struct TokenShard {
  std::string path;
  int64_t tokens = 0;
};

// The files `pattern` matches (glob(3): *, ?, [...]), sorted by name. Errors: no match
// (not_found, naming the pattern).
Result<std::vector<std::string>> glob_files(const std::string& pattern);
// Reads and checks a shard's header against its size. Errors (invalid_input, naming the file):
// shorter than the header, a wrong magic number (not an llm.c shard), another version (2 is
// llm.c's uint32 LLaMA-3 format), a size that is not header + 2 x count bytes (truncated or
// trailing data); io_error when it cannot be read.
Result<TokenShard> read_token_shard(const std::string& path);
// The shards of `pattern`, each checked.
Result<std::vector<TokenShard>> token_shards(const std::string& pattern);
// Samples of `context` tokens in a shard of `tokens` tokens: (tokens - 1) / context.
int64_t token_windows(int64_t tokens, int64_t context);

// Which windows are trained on and which are held out: the last shard when `last_shard`
// (needs two shards), else the last round(W x fraction) of all W windows.
struct TokenSplit {
  struct Part {
    size_t shard = 0;
    int64_t first = 0, count = 0;  // windows [first, first + count) of the shard
  };
  std::vector<Part> train, heldout;
  int64_t train_windows = 0, heldout_windows = 0;
};
// Errors (invalid_input): fewer than two shards for `last_shard`, a part without a window.
Result<TokenSplit> split_tokens(const std::vector<TokenShard>& shards, int64_t context,
                                bool last_shard, double fraction);

// --- both --------------------------------------------------------------------------------

// The training samples of imagefolder or tokens data `d` (what an epoch is): the training
// images less the held-out share (none with DIR/val), or the training windows. Indexes the
// folder (a walk of every class folder) or reads the shards' headers. Errors: those of the
// layout readers; invalid_input for another kind.
Result<int64_t> real_data_train_samples(const DataConfig& d);

}  // namespace dltune::recipes
