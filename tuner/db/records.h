// The rows of the tuning database: what a plan or a measurement is keyed by, and where it came
// from. Plain data; validate_*() are the single place that decides what a well-formed row is, used
// both before every local write and before a bundle import touches the database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::tuner::db {

struct SoftwareVersions {
  std::string mpi;     // e.g. "4.1.4"; "" when not used
  std::string pmix;    // e.g. "4.2.2"
  std::string nccl;    // e.g. "2.18.3"; "" on CPU
  std::string dltune;  // the dltune version the measurement was made with
  bool operator==(const SoftwareVersions&) const = default;
};

struct JobShape {
  int64_t nodes = 1;
  int64_t ranks_per_node = 1;
  int64_t ranks() const { return nodes * ranks_per_node; }
  bool operator==(const JobShape&) const = default;
};

// Everything a plan or measurement is keyed by. `fingerprint` (topology/) and `recipe` (the recipe
// signature) are opaque lowercase hex; `recipe` is "" for collective-only plans. `family` is the
// caller's coarser key (same GPU/NIC/CPU models and path classes, counts left out) used for near
// hits; it is not part of the identity of a row.
struct Key {
  std::string fingerprint;
  std::string family;
  SoftwareVersions versions;
  JobShape shape;
  std::string recipe;
  // Identity: every field but `family`.
  bool same_identity(const Key& o) const {
    return fingerprint == o.fingerprint && versions == o.versions && shape == o.shape &&
           recipe == o.recipe;
  }
};

// Who wrote a row, where and when, and who vouched for it. `created_at` is Unix seconds (UTC).
struct Provenance {
  std::string site;  // "" for a local row never exported
  std::string host;
  std::string user;
  std::string dltune_version;
  int64_t created_at = 0;
  // Set by import and merge, never taken from the input: the name of the trusted key whose
  // signature the row's bundle carried (signing.h), kUnsigned for a row that came from an
  // unsigned (or untrusted) bundle or database, "" for a row made on this machine.
  std::string signed_by;
  bool operator==(const Provenance&) const = default;
};
inline constexpr const char* kUnsigned = "unsigned";

// This process's provenance: host name, user name, this dltune's version, now.
Provenance local_provenance(std::string site = "");

// One collective measurement summary. Times are microseconds; a failed trial keeps its reason
// and may have no times (0).
struct Measurement {
  Key key;
  std::string collective;  // "allreduce", "broadcast", ...
  std::string algorithm;   // "ring", "rd", ...
  uint64_t segment_bytes = 0;
  uint64_t bytes = 0;
  double median_us = 0, p10_us = 0, p90_us = 0, iqr_us = 0;
  int64_t samples = 0;
  bool failed = false;
  std::string reason;
  Provenance provenance;
};

// A stored Plan (recipes/plan.h JSON, kept as text).
struct PlanRecord {
  Key key;
  std::string plan_json;
  Provenance provenance;
};

// One recipe trial: a short trial training of one candidate configuration in one round of the
// recipe search (tuner/recipe_tuning.h), stored with the plan it produced (same Key identity;
// writing a plan replaces its trials). samples_per_s is the trial's throughput (global batch
// over the mean of the slowest rank's step times, over `steps` timed steps: the sample count);
// the median and interquartile range of the per-step throughput are kept when the trial
// program reports them, else nullopt. A failed trial keeps its reason and may have no times.
struct RecipeTrial {
  Key key;
  int64_t round = 0;
  int64_t candidate = 0;  // index into the search's candidate list
  std::string label;      // "b64 weak bucket=1MiB overlap"
  // The configuration.
  int64_t per_rank_batch = 1;
  int64_t global_batch = 1;
  std::string scaling;  // "weak" | "strong"
  uint64_t bucket_bytes = 0;
  bool overlap = false;
  double lr_scale = 1.0;
  // The measurement.
  int64_t steps = 0;
  double samples_per_s = 0;
  double step_s = 0;
  std::optional<double> median_sps, iqr_sps;
  // The step split (schema v5; nullopt / empty when the trial program did not report it):
  // compute and exposed communication seconds per step, and each bucket's allreduce seconds.
  // Local detail: bundles do not carry it, and merges do not compare it.
  std::optional<double> compute_s, exposed_comm_s;
  std::vector<double> allreduce_s;
  // The training memory (schema v6; nullopt when the trial program did not measure it): the
  // memory model's estimate for the rank with the largest one, and that rank's measured peak,
  // bytes. Local detail as the step split.
  std::optional<int64_t> memory_estimate_bytes, memory_peak_bytes;
  bool failed = false;
  std::string reason;
  Provenance provenance;
};

// A per-level cost model of one machine and job shape (predict/level_fit.h): t = alpha + beta
// n + gamma n with an algorithm's coefficients, fitted from that shape's allreduce sweep.
// Derived from the measurements (a bundle carries those; an importer refits), so bundles do
// not carry it.
struct CostModel {
  Key key;            // recipe "" (collectives)
  std::string level;  // "intra" | "inter"
  double alpha_s = 0, beta_s_per_b = 0, gamma_s_per_b = 0;
  double rel_rms = 0;  // the fit's root mean square relative error
  int64_t points = 0;  // measurements it was fitted to
  Provenance provenance;
};

// The scaling efficiency's 1-rank baseline as measured on a machine (schema v7): one rank
// training a job's per-rank work alone, which a later launch of the same work on a machine of the
// same fingerprint reuses instead of measuring again (issue 42). A measurement of this machine:
// bundles do not carry it.
struct BaselineRecord {
  Key key;                // shape 1 x 1, recipe: the recipe's signature (recipes::recipe_signature)
  std::string plan_hash;  // SHA-256 (hex) of what the one rank ran (launcher baseline_identity)
  std::string bind;       // the binding policy it ran under
  double samples_per_s = 0;
  int64_t steps = 0;   // the steps of the run that gave it
  double rel_ci = 0;   // ~95 % interval of its mean step time, relative
  double seconds = 0;  // the time its runs' steps took
  Provenance provenance;
};

// How computation and communication slowed each other on a machine (schema v8; the model of
// planning/overlap.h): G ranks of one node training a model while they allreduce, measured by
// `dltune predict --interference measure` and used by later predictions of the same work on a
// machine of the same fingerprint (`dltune predict`, a launch's predicted row) instead of the
// assumption by kind. A measurement of this machine: bundles do not carry it.
struct InterferenceRecord {
  struct Point {
    double bytes = 0;
    double compute = 0, compute_low = 0, compute_high = 0;  // compute's slowdown and its range
    double comm = 0, comm_low = 0, comm_high = 0;           // the allreduce's
  };
  Key key;                    // shape 1 x G (the ranks that ran), recipe: the model's identity
  int64_t threads = 1;        // each rank's threads
  int64_t batch = 1;          // each rank's batch
  std::vector<Point> points;  // ascending bytes
  std::string source;         // how it was measured (free text)
  Provenance provenance;
};
inline constexpr size_t kMaxInterferencePoints = 32;

// Limits on stored text, so that a hostile bundle cannot blow up a database or a terminal.
inline constexpr size_t kMaxTokenBytes = 128;
inline constexpr size_t kMaxTextBytes = 512;
inline constexpr size_t kMaxPlanBytes = 1 << 20;

// Each returns invalid_input naming the field ("key.fingerprint: expected lowercase hex, got ...")
// when the row is malformed or implausible, else ok. These are what every local write and every
// import (bundle or database) must pass, so that a well-formed but absurd bundle is refused
// naming the field:
// - identifier fields allow [A-Za-z0-9._:+@/-] (at most kMaxTokenBytes); fingerprint, family
//   and recipe are lowercase hex of at most 64 digits (the latter two may be empty); free text
//   (reasons, sites) printable ASCII without quotes, backslashes, semicolons or backticks;
// - created_at is not before 2000 nor more than a day ahead of this machine's clock;
// - the plan is a whole plan (recipes::parse_plan: known collectives and algorithms, ranges
//   that cover every size), plausible (recipes::check_plan_plausible: batches, warm-up,
//   buckets, placement in range) and for the key's job shape;
// - a measurement names a known collective and algorithm, with sizes, times and samples in
//   range, and (unless it failed) p10 <= median <= p90.
Status validate_key(const Key& key);
Status validate_provenance(const Provenance& p);
Status validate_plan(const PlanRecord& plan);
Status validate_measurement(const Measurement& m);
// Also: label is free text (non-empty), scaling "weak" or "strong", batches >= 1, a bucket and
// an lr factor within a plan's bounds (recipes::check_plan_plausible), a successful trial has
// steps and a positive throughput.
Status validate_trial(const RecipeTrial& t);
// Also: level "intra" or "inter", finite non-negative coefficients and error, points >= 1.
Status validate_cost_model(const CostModel& c);
// Also: plan_hash 64 lowercase hex digits, bind a token, samples_per_s and rel_ci finite and
// positive / non-negative, steps >= 1, seconds finite and non-negative.
Status validate_baseline(const BaselineRecord& b);

// Also: threads and batch within a plan's bounds, 1 to kMaxInterferencePoints points at
// ascending byte counts (4 B to 1 TiB), each slowdown finite in (-1, 9] (planning/overlap.h's
// cap) with low <= slowdown <= high, source free text.
Status validate_interference(const InterferenceRecord& r);

// `s` made acceptable as free text: control and non-ASCII characters become spaces, quotes and
// backticks '*', backslashes and semicolons ','; cut to kMaxTextBytes - 12 bytes.
std::string clean_text(std::string_view s);

// A short printable form of a possibly hostile string for error messages (quoted, cut at 40).
std::string quote_for_error(std::string_view s);

}  // namespace dltune::tuner::db
