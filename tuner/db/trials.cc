// Recipe trials in the tuning database (schema v3, their step split v5, their memory v6):
// reading, writing with their plan, and the row helpers merge and prune share.
#include <algorithm>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "common/json_input.h"
#include "tuner/db/store.h"
#include "tuner/db/store_sql.h"

namespace dltune::tuner::db {
namespace detail {

RecipeTrial read_trial(const Statement& st) {
  RecipeTrial t;
  t.key = read_key(st, 0);
  t.round = st.integer(9);
  t.candidate = st.integer(10);
  t.label = st.text(11);
  t.per_rank_batch = st.integer(12);
  t.global_batch = st.integer(13);
  t.scaling = st.text(14);
  t.bucket_bytes = static_cast<uint64_t>(st.integer(15));
  t.overlap = st.integer(16) != 0;
  t.lr_scale = st.real(17);
  t.steps = st.integer(18);
  t.samples_per_s = st.real(19);
  t.step_s = st.real(20);
  if (!st.is_null(21)) t.median_sps = st.real(21);
  if (!st.is_null(22)) t.iqr_sps = st.real(22);
  t.failed = st.integer(23) != 0;
  t.reason = st.text(24);
  t.provenance = read_provenance(st, 25);
  // After the 6 provenance columns (25..30): the step split.
  if (!st.is_null(31)) t.compute_s = st.real(31);
  if (!st.is_null(32)) t.exposed_comm_s = st.real(32);
  if (!st.is_null(33)) {
    const auto a = parse_json_bounded(st.text(33), {.max_bytes = size_t{1} << 20, .max_depth = 2})
                       .value_or(nlohmann::json());
    if (a.is_array()) {
      for (const auto& v : a) {
        if (v.is_number()) t.allreduce_s.push_back(v.get<double>());
      }
    }
  }
  if (!st.is_null(34)) t.memory_estimate_bytes = st.integer(34);
  if (!st.is_null(35)) t.memory_peak_bytes = st.integer(35);
  return t;
}

void bind_trial(Statement& st, const RecipeTrial& t) {
  bind_key(st, 1, t.key, true);
  st.bind(10, t.round)
      .bind(11, t.candidate)
      .bind(12, t.label)
      .bind(13, t.per_rank_batch)
      .bind(14, t.global_batch)
      .bind(15, t.scaling)
      .bind(16, static_cast<int64_t>(t.bucket_bytes))
      .bind(17, int64_t{t.overlap ? 1 : 0})
      .bind(18, t.lr_scale)
      .bind(19, t.steps)
      .bind(20, t.samples_per_s)
      .bind(21, t.step_s);
  if (t.median_sps) {
    st.bind(22, *t.median_sps);
  } else {
    st.bind_null(22);
  }
  if (t.iqr_sps) {
    st.bind(23, *t.iqr_sps);
  } else {
    st.bind_null(23);
  }
  st.bind(24, int64_t{t.failed ? 1 : 0}).bind(25, t.reason);
  bind_provenance(st, 26, t.provenance);
  // After the 6 provenance values (?26..?31): the step split.
  if (t.compute_s) {
    st.bind(32, *t.compute_s);
  } else {
    st.bind_null(32);
  }
  if (t.exposed_comm_s) {
    st.bind(33, *t.exposed_comm_s);
  } else {
    st.bind_null(33);
  }
  if (!t.allreduce_s.empty()) {
    st.bind(34, nlohmann::json(t.allreduce_s).dump());
  } else {
    st.bind_null(34);
  }
  for (auto [i, v] : {std::pair{35, t.memory_estimate_bytes}, {36, t.memory_peak_bytes}}) {
    if (v) {
      st.bind(i, *v);
    } else {
      st.bind_null(i);
    }
  }
}

bool same_trials(std::vector<RecipeTrial> a, std::vector<RecipeTrial> b) {
  if (a.size() != b.size()) return false;
  const auto by_slot = [](const RecipeTrial& x, const RecipeTrial& y) {
    return std::tie(x.round, x.candidate) < std::tie(y.round, y.candidate);
  };
  std::sort(a.begin(), a.end(), by_slot);
  std::sort(b.begin(), b.end(), by_slot);
  for (size_t i = 0; i < a.size(); ++i) {
    const RecipeTrial& x = a[i];
    const RecipeTrial& y = b[i];
    const bool same = x.key.same_identity(y.key) && x.key.family == y.key.family &&
                      x.round == y.round && x.candidate == y.candidate && x.label == y.label &&
                      x.per_rank_batch == y.per_rank_batch && x.global_batch == y.global_batch &&
                      x.scaling == y.scaling && x.bucket_bytes == y.bucket_bytes &&
                      x.overlap == y.overlap && x.lr_scale == y.lr_scale && x.steps == y.steps &&
                      x.samples_per_s == y.samples_per_s && x.step_s == y.step_s &&
                      x.median_sps == y.median_sps && x.iqr_sps == y.iqr_sps &&
                      x.failed == y.failed && x.reason == y.reason && x.provenance == y.provenance;
    if (!same) return false;
  }
  return true;
}

}  // namespace detail

Status TuningDb::write_trials(const Key& plan_key, std::span<const RecipeTrial* const> trials,
                              int64_t* n) {
  auto id = connection().prepare("SELECT id FROM plans WHERE " DLTUNE_DB_IDENTITY_WHERE);
  if (!id) return std::move(id).error();
  detail::bind_key(*id, 1, plan_key, false);
  auto row = id->step();
  if (!row) return std::move(row).error();
  DLTUNE_CHECK(*row);  // callers write the plan first, in the same transaction
  const int64_t plan_id = id->integer(0);
  auto del = connection().prepare("DELETE FROM recipe_trials WHERE plan_id = ?1");
  if (!del) return std::move(del).error();
  del->bind(1, plan_id);
  DLTUNE_TRY(del->run());
  for (const RecipeTrial* t : trials) {
    auto st = connection().prepare(
        "INSERT INTO recipe_trials(" DLTUNE_DB_TRIAL_COLS
        ", plan_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
        "?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, "
        "?34, ?35, ?36, ?37)");
    if (!st) return std::move(st).error();
    detail::bind_trial(*st, *t);
    st->bind(37, plan_id);
    DLTUNE_TRY(st->run());
    row_written(++*n);
  }
  return ok_status();
}

Result<std::vector<RecipeTrial>> TuningDb::trials_of(const Key& plan_key) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_TRIAL_COLS
                                 " FROM recipe_trials WHERE " DLTUNE_DB_IDENTITY_WHERE
                                 " ORDER BY round, candidate");
  if (!st) return std::move(st).error();
  detail::bind_key(*st, 1, plan_key, false);
  std::vector<RecipeTrial> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    out.push_back(detail::read_trial(*st));
  }
}

Result<std::vector<RecipeTrial>> TuningDb::recipe_trials(const Filter& filter) {
  auto st = connection().prepare("SELECT " DLTUNE_DB_TRIAL_COLS
                                 " FROM recipe_trials" DLTUNE_DB_FILTER_WHERE
                                 " ORDER BY plan_id, round, candidate");
  if (!st) return std::move(st).error();
  detail::bind_filter(*st, filter);
  std::vector<RecipeTrial> out;
  while (true) {
    auto row = st->step();
    if (!row) return std::move(row).error();
    if (!*row) return out;
    out.push_back(detail::read_trial(*st));
  }
}

}  // namespace dltune::tuner::db
