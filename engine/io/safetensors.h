// Weights in and out as safetensors files (the format of Hugging Face's safetensors library):
//
//   8 bytes    little-endian u64 N: the header's length
//   N bytes    JSON: {"NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [b, e]},
//                     ..., "__metadata__": {"key": "value", ...}}   (padded with spaces)
//   the data   each tensor's bytes at [b, e) after the header, little-endian, row-major
//
// The engine stores f32 parameters; integer tensors named "*.num_batches_tracked" (PyTorch's
// batch-norm counters) are read as counts and written as I64, so torchvision state_dicts load
// unchanged and the files dltune writes load into torchvision with load_state_dict.
// Every reader bounds what it trusts: the header must fit the file (and 100 MB), nest at most a
// few levels, and every tensor's offsets must lie inside the data with the size its dtype and
// shape imply; a bad file is one sentence naming the tensor, and nothing is loaded.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/graph/model.h"

namespace dltune::engine {

struct StoredTensor {
  std::string dtype;  // "F32", "I64", ...
  std::vector<int64_t> shape;
  std::vector<float> values;  // F32 as is; integer dtypes converted (counters)
};

using TensorFile = std::map<std::string, StoredTensor>;

// Parses safetensors bytes. Errors (invalid_input): "<what>: tensor 'x': ..." for the first
// problem found; `what` names the file in messages.
Result<TensorFile> parse_safetensors(const std::string& bytes, const std::string& what);
// Reads a file (io_error when unreadable) and parses it.
Result<TensorFile> read_safetensors(const std::string& path);
// Serialises tensors (F32 unless dtype says I64) in name order with `metadata`.
std::string encode_safetensors(const TensorFile& tensors,
                               const std::map<std::string, std::string>& metadata = {});
// Writes atomically. Errors: io_error naming the path.
Status write_safetensors(const std::string& path, const TensorFile& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Loads every parameter and state tensor of `model` from the file: each must be present with
// the model's shape and an f32 dtype (counters: any integer dtype); a tensor the model does not
// have is an error too (PyTorch's strict loading). On error the model is unchanged.
Status load_safetensors_into(Model& model, const std::string& path);
// The same for a part of a model (a pipeline stage): `aliases` maps a tensor of the model to
// the file's name for it (a stage's copy of a tied weight reads its owner); the file may also
// hold the tensors named in `others` (the other stages'), and nothing else.
struct SafetensorsLoad {
  std::map<std::string, std::string> aliases;
  std::set<std::string> others;
};
Status load_safetensors_into(Model& model, const std::string& path, const SafetensorsLoad& how);
// The model's parameters and state as tensors (counters as I64).
TensorFile model_tensors(const Model& model);

}  // namespace dltune::engine
