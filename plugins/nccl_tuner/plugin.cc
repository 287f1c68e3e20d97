// The NCCL tuner plugin shim: exports ncclTunerPlugin_v5, _v4 and _v3 and forwards to
// Decision. It never aborts and never throws into NCCL: any failure logs one line through
// NCCL's logger and leaves NCCL's own tuning in charge.
//
// Where the plan comes from: DLTUNE_PLAN names a plan file (set by `dltune run`/`launch` for
// their ranks, and by the SPANK plugin for any srun task); when it is not set, the tuning
// databases (db_source.h) are searched for this node and the communicator's shape. Either
// way, a plan for another shape, a broken plan or a miss logs one line and NCCL decides.
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "common/env.h"
#include "common/paths.h"
#include "plugins/nccl_tuner/db_source.h"
#include "plugins/nccl_tuner/decision.h"
#include "plugins/nccl_tuner/nccl_tuner_abi.h"

namespace dltune::plugins {
namespace {

struct Context {
  Decision decision;
  nccl_abi_logger_t log = nullptr;
  size_t applied = 0;
};

void log_line(nccl_abi_logger_t log, int level, const std::string& msg) {
  if (log != nullptr)
    log(level, kNcclLogTuning, __FILE__, __LINE__, "dltune tuner: %s", msg.c_str());
}

nccl_abi_result_t init_common(size_t n_ranks, size_t n_nodes, nccl_abi_logger_t log,
                              void** context) {
  if (context == nullptr) return kNcclInvalidArgument;
  *context = nullptr;
  try {
    auto* ctx = new (std::nothrow) Context;
    if (ctx == nullptr) return kNcclInternalError;
    ctx->log = log;
    *context = ctx;
    // The plan: the file DLTUNE_PLAN names, else the databases' plan for this node and shape.
    std::string source, text;
    if (const auto plan_path = env::get_if_set(env::kPlan)) {
      source = "plan '" + *plan_path + "'";
      auto file = paths::read_file(*plan_path);
      if (!file) {
        log_line(log, kNcclLogWarn,
                 "ignoring " + source + ": " + file.error().message() +
                     "; NCCL's default tuning applies");
        return kNcclSuccess;
      }
      text = std::move(*file);
    } else {
      auto db = plan_from_db(n_ranks, n_nodes);
      if (!db) {
        log_line(log, kNcclLogWarn,
                 "DLTUNE_PLAN is not set and the database look-up failed: " + db.error().message() +
                     "; NCCL's default tuning applies");
        return kNcclSuccess;
      }
      if (db->plan_json.empty()) {
        log_line(
            log, kNcclLogInfo,
            "DLTUNE_PLAN is not set and " + db->description + "; NCCL's default tuning applies");
        return kNcclSuccess;
      }
      source = "database plan (" + db->description + ")";
      text = std::move(db->plan_json);
    }
    auto decision = Decision::from_plan_json(text, n_ranks, n_nodes);
    if (!decision) {
      log_line(log, kNcclLogWarn,
               "ignoring " + source + ": " + decision.error().message() +
                   "; NCCL's default tuning applies");
      return kNcclSuccess;
    }
    ctx->decision = std::move(*decision);
    if (!ctx->decision.note().empty()) {
      log_line(log, kNcclLogInfo,
               source + ": " + ctx->decision.note() + "; NCCL's default tuning applies");
    } else {
      log_line(
          log, kNcclLogInfo,
          source + " loaded with " + std::to_string(ctx->decision.rules().size()) + " rule(s)");
    }
    return kNcclSuccess;
  } catch (const std::exception& e) {
    log_line(log, kNcclLogWarn, std::string("initialisation failed: ") + e.what());
    return kNcclSuccess;  // *context may be null: getCollInfo then leaves NCCL's choice
  } catch (...) {
    return kNcclSuccess;
  }
}

nccl_abi_result_t get_coll_info(void* context, int coll, size_t n_bytes, int /*num_pipe_ops*/,
                                float** cost_table, int num_algo, int num_proto, int /*reg_buff*/,
                                int* /*n_channels*/) {
  auto* ctx = static_cast<Context*>(context);
  if (ctx == nullptr) return kNcclSuccess;
  try {
    if (ctx->decision.apply(coll, n_bytes, cost_table, num_algo, num_proto)) ++ctx->applied;
  } catch (...) {
    // Nothing in apply() throws today; if it ever does, NCCL keeps its own choice.
  }
  return kNcclSuccess;
}

nccl_abi_result_t destroy(void* context) {
  auto* ctx = static_cast<Context*>(context);
  if (ctx != nullptr) {
    log_line(ctx->log, kNcclLogInfo,
             "applied the plan to " + std::to_string(ctx->applied) + " collective call(s)");
  }
  delete ctx;
  return kNcclSuccess;
}

nccl_abi_result_t init_v5(void** context, uint64_t /*comm_id*/, size_t n_ranks, size_t n_nodes,
                          nccl_abi_logger_t log, nccl_nvl_domain_info_v5_t* /*nvl*/,
                          nccl_tuner_constants_v5_t* /*constants*/) {
  return init_common(n_ranks, n_nodes, log, context);
}

nccl_abi_result_t get_coll_info_v3(void* context, int coll, size_t n_bytes, int num_pipe_ops,
                                   float** cost_table, int num_algo, int num_proto,
                                   int* n_channels) {
  return get_coll_info(context, coll, n_bytes, num_pipe_ops, cost_table, num_algo, num_proto, 0,
                       n_channels);
}

}  // namespace
}  // namespace dltune::plugins

extern "C" {
using namespace dltune::plugins;  // NOLINT: the exported tables below name the shims

__attribute__((visibility("default")))
nccl_tuner_v5_t ncclTunerPlugin_v5 = {"dltune", init_v5, get_coll_info, destroy};
__attribute__((visibility("default")))
nccl_tuner_v4_t ncclTunerPlugin_v4 = {"dltune", init_common, get_coll_info, destroy};
__attribute__((visibility("default")))
nccl_tuner_v3_t ncclTunerPlugin_v3 = {"dltune", init_common, get_coll_info_v3, destroy};
}
