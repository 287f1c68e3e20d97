#include "comm/types.h"

#include <string>

#include "common/strings.h"

namespace dltune::comm {

size_t dtype_size(DataType type) {
  switch (type) {
    case DataType::kF32:
    case DataType::kI32:
      return 4;
    case DataType::kF64:
    case DataType::kI64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DataType type) {
  switch (type) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
  }
  return "?";
}

std::string_view op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

const std::vector<Algorithm>& all_algorithms() {
  static const std::vector<Algorithm> kAll = {
      Algorithm::kRing,         Algorithm::kRecursiveDoubling,
      Algorithm::kRabenseifner, Algorithm::kTree,
      Algorithm::kHierarchical, Algorithm::kShm,
      Algorithm::kCma,          Algorithm::kNative};
  return kAll;
}

std::string_view algorithm_name(Algorithm algo) {
  switch (algo) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "rd";
    case Algorithm::kRabenseifner:
      return "rabenseifner";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kHierarchical:
      return "hier";
    case Algorithm::kShm:
      return "shm";
    case Algorithm::kCma:
      return "cma";
    case Algorithm::kNative:
      return "native";
  }
  return "?";
}

Result<Algorithm> parse_algorithm(std::string_view name) {
  std::string names;
  std::string_view closest;
  size_t best = SIZE_MAX;
  for (Algorithm a : all_algorithms()) {
    if (algorithm_name(a) == name) return a;
    names += (names.empty() ? "" : ", ") + std::string(algorithm_name(a));
    size_t d = strings::edit_distance(name, algorithm_name(a));
    if (d < best) best = d, closest = algorithm_name(a);
  }
  std::string msg = "unknown algorithm '" + std::string(name) + "'; expected one of " + names;
  if (best <= 2) msg += " (did you mean '" + std::string(closest) + "'?)";
  return invalid_input(msg);
}

Result<std::vector<Algorithm>> parse_algorithm_list(std::string_view list) {
  if (list == "all") return all_algorithms();
  std::vector<Algorithm> out;
  for (const std::string& item : strings::split(list, ',')) {
    std::string name = strings::trim(item);
    if (name.empty()) {
      return invalid_input("empty item in algorithm list '" + std::string(list) +
                           "'; give names separated by commas, e.g. ring,rd,native");
    }
    auto a = parse_algorithm(name);
    if (!a) return a.error();
    for (Algorithm seen : out) {
      if (seen == *a) {
        return invalid_input("algorithm '" + name + "' is listed twice in '" + std::string(list) +
                             "'");
      }
    }
    out.push_back(*a);
  }
  return out;
}

}  // namespace dltune::comm
