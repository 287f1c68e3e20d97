// The NCCL tuner plugin ABI (versions 3, 4 and 5), declared here from NCCL's public plugin
// documentation so that the plugin builds on machines without NCCL's headers. These layouts
// are frozen by NCCL: never reorder or resize a field. NCCL looks up the symbols
// ncclTunerPlugin_v5, _v4, _v3 (newest first) in the library named by NCCL_TUNER_PLUGIN.
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

// ncclResult_t is an int-sized enum in nccl.h; only these values are used here.
typedef int nccl_abi_result_t;
enum : nccl_abi_result_t { kNcclSuccess = 0, kNcclInternalError = 3, kNcclInvalidArgument = 4 };

// ncclFunc_t values.
enum NcclFunc : int {
  kNcclFuncBroadcast = 0,
  kNcclFuncReduce = 1,
  kNcclFuncAllGather = 2,
  kNcclFuncReduceScatter = 3,
  kNcclFuncAllReduce = 4,
};

// Algorithm and protocol indexes of the cost table (collCostTable[algo][proto]).
enum NcclAlgo : int {
  kNcclAlgoTree = 0,
  kNcclAlgoRing = 1,
  kNcclAlgoCollnetDirect = 2,
  kNcclAlgoCollnetChain = 3,
  kNcclAlgoNvls = 4,
  kNcclAlgoNvlsTree = 5,
  kNcclAlgoPat = 6,
  kNcclNumAlgorithms = 7,
};
enum NcclProto : int {
  kNcclProtoLL = 0,
  kNcclProtoLL128 = 1,
  kNcclProtoSimple = 2,
  kNcclNumProtocols = 3
};
// Cost-table entries NCCL will not use are set to this.
constexpr float kNcclAlgoProtoIgnore = -1.0f;

// ncclDebugLogLevel and the logger NCCL hands to init().
enum NcclLogLevel : int {
  kNcclLogNone = 0,
  kNcclLogVersion = 1,
  kNcclLogWarn = 2,
  kNcclLogInfo = 3
};
constexpr unsigned long kNcclLogTuning = 64;  // NCCL_TUNING subsystem flag
typedef void (*nccl_abi_logger_t)(int level, unsigned long flags, const char* file, int line,
                                  const char* fmt, ...);

typedef struct {
  const char* name;
  nccl_abi_result_t (*init)(size_t n_ranks, size_t n_nodes, nccl_abi_logger_t log, void** context);
  nccl_abi_result_t (*getCollInfo)(void* context, int coll, size_t n_bytes, int num_pipe_ops,
                                   float** cost_table, int num_algo, int num_proto,
                                   int* n_channels);
  nccl_abi_result_t (*destroy)(void* context);
} nccl_tuner_v3_t;

typedef struct {
  const char* name;
  nccl_abi_result_t (*init)(size_t n_ranks, size_t n_nodes, nccl_abi_logger_t log, void** context);
  nccl_abi_result_t (*getCollInfo)(void* context, int coll, size_t n_bytes, int num_pipe_ops,
                                   float** cost_table, int num_algo, int num_proto, int reg_buff,
                                   int* n_channels);
  nccl_abi_result_t (*destroy)(void* context);
} nccl_tuner_v4_t;

typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} nccl_nvl_domain_info_v5_t;

// Tuning constants NCCL lets a v5 plugin adjust; dltune leaves them as they are.
typedef struct {
  double baseLatencies[7][3];
  double hwLatencies[3][7][3];
  double llMaxBws[4][3];
  double perChMaxRingLL128Bws[4][3];
  double perChMaxTreeLL128Bws[4][3];
  double perChMaxTreeBws[4][3];
  double perChMaxNVLSTreeBws[4][3];
} nccl_tuner_constants_v5_t;

typedef struct {
  const char* name;
  nccl_abi_result_t (*init)(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                            nccl_abi_logger_t log, nccl_nvl_domain_info_v5_t* nvl_domain_info,
                            nccl_tuner_constants_v5_t* constants);
  nccl_abi_result_t (*getCollInfo)(void* context, int coll, size_t n_bytes, int num_pipe_ops,
                                   float** cost_table, int num_algo, int num_proto, int reg_buff,
                                   int* n_channels);
  nccl_abi_result_t (*finalize)(void* context);
} nccl_tuner_v5_t;

}  // extern "C"
