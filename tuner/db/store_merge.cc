// TuningDb::merge_rows: applying bundle or database rows under a conflict policy.
#include <ctime>
#include <string>
#include <vector>

#include "tuner/db/store.h"
#include "tuner/db/store_sql.h"

namespace dltune::tuner::db {
namespace {

bool same_plan(const PlanRecord& a, const PlanRecord& b) {
  return a.key.same_identity(b.key) && a.key.family == b.key.family && a.plan_json == b.plan_json &&
         a.provenance == b.provenance;
}

// True when `incoming` is `local` (imported unsigned) now vouched for by a trusted key.
bool signed_copy_of(const PlanRecord& local, const PlanRecord& incoming) {
  PlanRecord relabelled = local;
  relabelled.provenance.signed_by = incoming.provenance.signed_by;
  return local.provenance.signed_by == kUnsigned && !incoming.provenance.signed_by.empty() &&
         incoming.provenance.signed_by != kUnsigned && same_plan(relabelled, incoming);
}

bool same_measurement(const Measurement& a, const Measurement& b) {
  return a.key.same_identity(b.key) && a.key.family == b.key.family &&
         a.collective == b.collective && a.algorithm == b.algorithm &&
         a.segment_bytes == b.segment_bytes && a.bytes == b.bytes && a.median_us == b.median_us &&
         a.p10_us == b.p10_us && a.p90_us == b.p90_us && a.iqr_us == b.iqr_us &&
         a.samples == b.samples && a.failed == b.failed && a.reason == b.reason &&
         a.provenance == b.provenance;
}

// True when `incoming` is `local` (imported unsigned) now vouched for by a trusted key.
bool signed_copy_of(const Measurement& local, const Measurement& incoming) {
  Measurement relabelled = local;
  relabelled.provenance.signed_by = incoming.provenance.signed_by;
  return local.provenance.signed_by == kUnsigned && !incoming.provenance.signed_by.empty() &&
         incoming.provenance.signed_by != kUnsigned && same_measurement(relabelled, incoming);
}

// True when the incoming row should replace the local one under `policy`.
bool incoming_wins(ConflictPolicy policy, const Provenance& local, const Provenance& incoming,
                   int64_t local_samples, int64_t incoming_samples, bool has_samples) {
  switch (policy) {
    case ConflictPolicy::kKeepLocal:
      return false;
    case ConflictPolicy::kPreferMoreSamples:
      if (has_samples) return incoming_samples > local_samples;
      [[fallthrough]];
    case ConflictPolicy::kPreferNewer:
      return incoming.created_at > local.created_at;
  }
  return false;
}

std::string utc(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Why the plan conflict between `local` and `incoming` went the way it did.
std::string conflict_reason(ConflictPolicy policy, const PlanRecord& local,
                            const PlanRecord& incoming, bool incoming_won) {
  const std::string times = "incoming " + utc(incoming.provenance.created_at) + ", local " +
                            utc(local.provenance.created_at);
  switch (policy) {
    case ConflictPolicy::kKeepLocal:
      return "policy keep-local: the local plan stays";
    case ConflictPolicy::kPreferMoreSamples:
    case ConflictPolicy::kPreferNewer: {
      const std::string name = policy == ConflictPolicy::kPreferNewer
                                   ? "prefer-newer"
                                   : "prefer-more-samples (plans: newer wins)";
      if (incoming_won) return "policy " + name + ": the incoming plan is newer (" + times + ")";
      if (incoming.provenance.created_at == local.provenance.created_at) {
        return "policy " + name + ": same time, the local plan stays (" + times + ")";
      }
      return "policy " + name + ": the local plan is newer (" + times + ")";
    }
  }
  return "";
}

}  // namespace

Status validate_rows(std::span<const PlanRecord> plans, std::span<const Measurement> measurements,
                     std::span<const RecipeTrial> trials) {
  for (size_t i = 0; i < plans.size(); ++i) {
    DLTUNE_TRY_CTX(validate_plan(plans[i]), "plans[" + std::to_string(i) + "]");
  }
  for (size_t i = 0; i < measurements.size(); ++i) {
    DLTUNE_TRY_CTX(validate_measurement(measurements[i]),
                   "measurements[" + std::to_string(i) + "]");
  }
  for (size_t i = 0; i < trials.size(); ++i) {
    const std::string where = "recipe_trials[" + std::to_string(i) + "]";
    DLTUNE_TRY_CTX(validate_trial(trials[i]), where);
    bool has_plan = false;
    for (const PlanRecord& p : plans) has_plan = has_plan || p.key.same_identity(trials[i].key);
    if (!has_plan) {
      return invalid_input(where +
                           ": no plan with its key among the rows (a recipe trial travels with "
                           "the plan it produced)");
    }
  }
  return ok_status();
}

Result<std::optional<Measurement>> TuningDb::find_measurement(const Measurement& m) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_MEAS_COLS
                                 " FROM measurements WHERE " DLTUNE_DB_IDENTITY_WHERE
                                 " AND collective = ?9 AND algorithm = ?10 AND "
                                 "segment_bytes = ?11 AND bytes = ?12");
  if (!st) return std::move(st).error();
  detail::bind_key(*st, 1, m.key, false);
  st->bind(9, m.collective)
      .bind(10, m.algorithm)
      .bind(11, static_cast<int64_t>(m.segment_bytes))
      .bind(12, static_cast<int64_t>(m.bytes));
  auto row = st->step();
  if (!row) return std::move(row).error();
  if (!*row) return std::optional<Measurement>();
  return std::optional<Measurement>(detail::read_measurement(*st));
}

Result<MergeReport> TuningDb::merge_rows(std::span<const PlanRecord> plans,
                                         std::span<const Measurement> measurements,
                                         ConflictPolicy policy, std::span<const RecipeTrial> trials,
                                         const std::string& source) {
  DLTUNE_TRY(check_writable());
  // Validate everything before the first write: all or nothing.
  DLTUNE_TRY(validate_rows(plans, measurements, trials));
  // Each plan's incoming trials (validate_rows made sure each has its plan).
  std::vector<std::vector<const RecipeTrial*>> trials_of_plan(plans.size());
  for (const RecipeTrial& t : trials) {
    size_t p = 0;
    while (!plans[p].key.same_identity(t.key)) ++p;
    trials_of_plan[p].push_back(&t);
  }
  MergeReport report;
  auto tx = Transaction::begin(connection());
  if (!tx) return std::move(tx).error();
  int64_t n = 0;
  for (const Measurement& m : measurements) {
    auto local = find_measurement(m);
    if (!local) return std::move(local).error();
    if (!*local) {
      ++report.measurements.added;
    } else if (signed_copy_of(**local, m)) {
      ++report.measurements.replaced;  // the same row takes the signature, whatever the policy
    } else if (same_measurement(**local, m)) {
      ++report.measurements.unchanged;
      continue;
    } else if (incoming_wins(policy, (*local)->provenance, m.provenance, (*local)->samples,
                             m.samples, true)) {
      ++report.measurements.replaced;
    } else {
      ++report.measurements.kept_local;
      continue;
    }
    DLTUNE_TRY_CTX(write_measurement(m), "merging into '" + path_ + "'");
    row_written(++n);
  }
  for (size_t i = 0; i < plans.size(); ++i) {
    const PlanRecord& p = plans[i];
    const auto& incoming = trials_of_plan[i];
    const auto count = static_cast<int64_t>(incoming.size());
    auto local = find_exact(p.key);
    if (!local) return std::move(local).error();
    if (!*local) {
      ++report.plans.added;
      report.recipe_trials.added += count;
    } else if (signed_copy_of(**local, p)) {
      // The plan imported unsigned, now signed by a trusted key: it takes the signature (the
      // content is the same), whatever the policy, and says so.
      ++report.plans.replaced;
      report.recipe_trials.replaced += count;
      report.plan_conflicts.push_back({**local, p, source, true,
                                       "the same plan, now signed by trusted key '" +
                                           p.provenance.signed_by + "' (it was unsigned)"});
    } else if (same_plan(**local, p)) {
      ++report.plans.unchanged;
      // The same plan: its trials are added only where the local copy has none.
      auto mine = trials_of(p.key);
      if (!mine) return std::move(mine).error();
      std::vector<RecipeTrial> theirs;
      for (const RecipeTrial* t : incoming) theirs.push_back(*t);
      if (detail::same_trials(*mine, theirs)) {
        report.recipe_trials.unchanged += count;
      } else if (mine->empty()) {
        report.recipe_trials.added += count;
        DLTUNE_TRY_CTX(write_trials(p.key, incoming, &n), "merging into '" + path_ + "'");
      } else {
        report.recipe_trials.kept_local += count;
      }
      continue;
    } else {
      const bool won = incoming_wins(policy, (*local)->provenance, p.provenance, 0, 0, false);
      report.plan_conflicts.push_back(
          {**local, p, source, won, conflict_reason(policy, **local, p, won)});
      if (won) {
        ++report.plans.replaced;
        report.recipe_trials.replaced += count;
      } else {
        ++report.plans.kept_local;
        report.recipe_trials.kept_local += count;
        continue;
      }
    }
    DLTUNE_TRY_CTX(write_plan(p), "merging into '" + path_ + "'");
    row_written(++n);
    // A new or replacing plan brings its own trials; the replaced plan's trials go.
    DLTUNE_TRY_CTX(write_trials(p.key, incoming, &n), "merging into '" + path_ + "'");
  }
  DLTUNE_TRY(tx->commit());
  return report;
}

}  // namespace dltune::tuner::db
