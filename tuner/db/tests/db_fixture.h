// Shared helpers for the tuner/db tests: a private temporary directory and sample rows.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include "common/hash.h"
#include "tuner/db/records.h"

namespace dltune::tuner::db::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dltune_db_test_XXXXXX";
    char* made = mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline Key sample_key(std::string fingerprint = "ab12", int64_t nodes = 1, int64_t rpn = 2) {
  Key k;
  k.fingerprint = std::move(fingerprint);
  k.family = "fa01";
  k.versions = {"4.1.4", "4.2.2", "", "0.1.0"};
  k.shape = {nodes, rpn};
  k.recipe = "cafe";
  return k;
}

inline Provenance sample_provenance(int64_t created_at = 1700000000, std::string site = "") {
  return {std::move(site), "node01", "alice", "0.1.0", created_at, ""};
}

// A plan for a `nodes` x `rpn` job whose allreduce switches from rd to ring at `switch_bytes`.
inline std::string sample_plan_json(uint64_t switch_bytes = 4096, const char* big = "ring",
                                    int64_t nodes = 1, int64_t rpn = 2) {
  return std::string(R"({"version":1,"collectives":{"allreduce":[)") +
         R"({"min_bytes":0,"max_bytes":)" + std::to_string(switch_bytes) +
         R"(,"algo":"rd","segment_bytes":0},{"min_bytes":)" + std::to_string(switch_bytes) +
         R"(,"max_bytes":18446744073709551615,"algo":")" + big +
         R"(","segment_bytes":0}]},"training":{"per_rank_batch":1,"global_batch":)" +
         std::to_string(nodes * rpn) + R"(,"scaling":"weak"},"job":{"nodes":)" +
         std::to_string(nodes) + R"(,"ranks_per_node":)" + std::to_string(rpn) + "}}";
}

inline PlanRecord sample_plan(Key key = sample_key(), int64_t created_at = 1700000000) {
  std::string plan = sample_plan_json(4096, "ring", key.shape.nodes, key.shape.ranks_per_node);
  return {std::move(key), std::move(plan), sample_provenance(created_at)};
}

inline Measurement sample_measurement(uint64_t bytes, std::string algo = "ring",
                                      Key key = sample_key(), int64_t samples = 20) {
  Measurement m;
  m.key = std::move(key);
  m.collective = "allreduce";
  m.algorithm = std::move(algo);
  m.bytes = bytes;
  m.median_us = 10.0 + static_cast<double>(bytes) / 1000.0;
  m.p10_us = m.median_us * 0.9;
  m.p90_us = m.median_us * 1.2;
  m.iqr_us = m.median_us * 0.1;
  m.samples = samples;
  m.provenance = sample_provenance();
  return m;
}

// Recomputes a bundle's checksum after a test edited it (what a hostile sender would do): over
// the whole payload for format 3, over the content for formats 1 and 2. Signatures are left
// as they are.
inline std::string rechecksum(nlohmann::json j) {
  const nlohmann::json payload = {{"format", j["format"]},
                                  {"format_version", j["format_version"]},
                                  {"provenance", j["provenance"]},
                                  {"content", j["content"]}};
  j["checksum"]["value"] =
      sha256_hex(j["format_version"] >= 3 ? payload.dump() : j["content"].dump());
  return j.dump();
}

}  // namespace dltune::tuner::db::testing
