// The classic coll/tuned rules file: writing it, and a strict parser (ompi_rules.h).
#include <cctype>
#include <string>
#include <vector>

#include "common/strings.h"
#include "tuner/db/ompi_rules.h"

#include "dltune/config.h"

namespace dltune::tuner::db {
namespace {

const char* collective_name(int id) {
  static const char* kNames[] = {"allgather",      "allgatherv",
                                 "allreduce",      "alltoall",
                                 "alltoallv",      "alltoallw",
                                 "barrier",        "bcast",
                                 "exscan",         "gather",
                                 "gatherv",        "reduce",
                                 "reduce_scatter", "reduce_scatter_block",
                                 "scan",           "scatter",
                                 "scatterv"};
  constexpr int kCount = sizeof(kNames) / sizeof(kNames[0]);
  return id >= 0 && id < kCount ? kNames[id] : nullptr;
}

// Highest algorithm id Open MPI 4.1 knows for a collective (ompi_info --param coll tuned).
int max_algorithm(int coll_id) {
  switch (coll_id) {
    case 0:
      return 6;  // allgather
    case 2:
      return 6;  // allreduce
    case 7:
      return 9;  // bcast
    default:
      return 16;
  }
}

// One non-empty line of numbers, comments removed.
struct Record {
  int line = 0;
  std::vector<std::string> tokens;
};

std::vector<Record> tokenize(std::string_view text) {
  std::vector<Record> out;
  int line_no = 0;
  for (const std::string& raw : strings::split(text, '\n')) {
    ++line_no;
    std::string_view line = raw;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    Record r{line_no, {}};
    for (std::string& t : strings::split(strings::trim(line), ' ')) {
      for (std::string& u : strings::split(strings::trim(t), '\t')) {
        if (!u.empty()) r.tokens.push_back(std::move(u));
      }
    }
    if (!r.tokens.empty()) out.push_back(std::move(r));
  }
  return out;
}

class Reader {
 public:
  explicit Reader(std::vector<Record> records) : records_(std::move(records)) {}

  bool done() const { return pos_ >= records_.size(); }
  int line() const { return done() ? last_line() : records_[pos_].line; }
  const Record& peek() const { return records_[pos_]; }
  void skip() { ++pos_; }

  // Reads one record holding exactly `n` numbers.
  Result<std::vector<uint64_t>> numbers(size_t n, const std::string& what) {
    if (done())
      return invalid_input("line " + std::to_string(last_line()) + ": file ends where " + what +
                           " was expected");
    const Record& r = records_[pos_];
    if (r.tokens.size() != n) {
      return invalid_input("line " + std::to_string(r.line) + ": expected " + what + " (" +
                           std::to_string(n) + " number" + (n == 1 ? "" : "s") + "), got " +
                           std::to_string(r.tokens.size()));
    }
    std::vector<uint64_t> out;
    for (const std::string& t : r.tokens) {
      auto v = strings::parse_int(t);
      if (!v) {
        return invalid_input("line " + std::to_string(r.line) + ": expected " + what + ", got '" +
                             t.substr(0, 20) + "'");
      }
      out.push_back(static_cast<uint64_t>(*v));
    }
    ++pos_;
    return out;
  }

 private:
  int last_line() const { return records_.empty() ? 0 : records_.back().line; }
  std::vector<Record> records_;
  size_t pos_ = 0;
};

Result<uint64_t> one(Reader& in, const std::string& what, uint64_t max) {
  const int line = in.line();
  auto v = in.numbers(1, what);
  if (!v) return std::move(v).error();
  if ((*v)[0] > max) {
    return invalid_input("line " + std::to_string(line) + ": " + what + " " +
                         std::to_string((*v)[0]) + " is out of range (at most " +
                         std::to_string(max) + ")");
  }
  return (*v)[0];
}

Result<OmpiCommRules> parse_comm(Reader& in, int version, int coll_id) {
  OmpiCommRules comm;
  auto size = one(in, "a comm size", 1u << 24);
  if (!size) return std::move(size).error();
  comm.comm_size = static_cast<int>(*size);
  const int count_line = in.line();
  auto count = one(in, "the number of message-size rules", 4096);
  if (!count) return std::move(count).error();
  const size_t columns = version == 2 ? 5 : 4;
  const std::string where =
      std::string(collective_name(coll_id)) + " comm size " + std::to_string(comm.comm_size);
  for (uint64_t i = 0; i < *count; ++i) {
    const int line = in.line();
    auto r = in.numbers(columns, "rule " + std::to_string(i + 1) + " of " + std::to_string(*count) +
                                     " for " + where);
    if (!r) {
      return invalid_input(r.error().message() + "; is the rule count declared on line " +
                           std::to_string(count_line) + " (" + std::to_string(*count) +
                           ") larger than the rules that follow?");
    }
    OmpiRule rule{(*r)[0], static_cast<int>((*r)[1]), static_cast<int>((*r)[2]), (*r)[3],
                  version == 2 ? static_cast<int>((*r)[4]) : 0};
    if ((*r)[1] > static_cast<uint64_t>(max_algorithm(coll_id))) {
      return invalid_input("line " + std::to_string(line) + ": algorithm " +
                           std::to_string((*r)[1]) + " does not exist for " +
                           collective_name(coll_id) + " in Open MPI 4.1");
    }
    if (!comm.rules.empty() && rule.msg_bytes <= comm.rules.back().msg_bytes) {
      return invalid_input("line " + std::to_string(line) + ": message sizes must increase (" +
                           std::to_string(rule.msg_bytes) + " after " +
                           std::to_string(comm.rules.back().msg_bytes) + ")");
    }
    comm.rules.push_back(rule);
  }
  return comm;
}

}  // namespace

std::string format_ompi_rules(const OmpiRulesFile& f) {
  std::string out;
  out += "# Open MPI coll/tuned dynamic rules, written by dltune " DLTUNE_VERSION ".\n";
  out += "# Use: --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename F\n";
  if (f.version == 2) out += "rule-file-version-2\n";
  out += std::to_string(f.collectives.size()) + " # number of collectives\n";
  for (const OmpiCollRules& c : f.collectives) {
    const char* name = collective_name(c.collective_id);
    out += std::to_string(c.collective_id) + " # collective id (" + (name ? name : "?") + ")\n";
    out += std::to_string(c.comm_sizes.size()) + " # number of comm sizes\n";
    for (const OmpiCommRules& cs : c.comm_sizes) {
      out += std::to_string(cs.comm_size) + " # comm size\n";
      out += std::to_string(cs.rules.size()) + " # number of message-size rules\n";
      out += f.version == 2 ? "# msg_bytes alg fan_in_out segment_bytes max_requests\n"
                            : "# msg_bytes alg fan_in_out segment_bytes\n";
      for (const OmpiRule& r : cs.rules) {
        out += std::to_string(r.msg_bytes) + " " + std::to_string(r.algorithm) + " " +
               std::to_string(r.fan_in_out) + " " + std::to_string(r.segment_bytes);
        if (f.version == 2) out += " " + std::to_string(r.max_requests);
        out += "\n";
      }
    }
  }
  return out;
}

Result<OmpiRulesFile> parse_ompi_rules(std::string_view text) {
  std::vector<Record> records = tokenize(text);
  OmpiRulesFile file;
  Reader in(std::move(records));
  if (in.done()) return invalid_input("the rules file is empty");
  if (in.peek().tokens.size() == 1 &&
      strings::starts_with(in.peek().tokens[0], "rule-file-version-")) {
    const std::string v = in.peek().tokens[0].substr(18);
    if (v != "1" && v != "2") {
      return invalid_input("line " + std::to_string(in.line()) + ": unknown rules file version '" +
                           v.substr(0, 10) + "'");
    }
    file.version = v == "1" ? 1 : 2;
    in.skip();
  }
  auto n = one(in, "the number of collectives", 64);
  if (!n) return std::move(n).error();
  for (uint64_t c = 0; c < *n; ++c) {
    const int line = in.line();
    auto id = one(in, "a collective id", 1000);
    if (!id) return std::move(id).error();
    if (collective_name(static_cast<int>(*id)) == nullptr) {
      return invalid_input("line " + std::to_string(line) + ": unknown collective id " +
                           std::to_string(*id));
    }
    OmpiCollRules coll{static_cast<int>(*id), {}};
    auto sizes = one(in, "the number of comm sizes", 4096);
    if (!sizes) return std::move(sizes).error();
    for (uint64_t s = 0; s < *sizes; ++s) {
      auto comm = parse_comm(in, file.version, coll.collective_id);
      if (!comm) return std::move(comm).error();
      coll.comm_sizes.push_back(std::move(*comm));
    }
    file.collectives.push_back(std::move(coll));
  }
  if (!in.done()) {
    return invalid_input("line " + std::to_string(in.line()) +
                         ": unexpected data after the last collective (are the declared counts "
                         "too small?)");
  }
  return file;
}

}  // namespace dltune::tuner::db
