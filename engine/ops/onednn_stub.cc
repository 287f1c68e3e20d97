// The build without oneDNN (engine/ops/onednn.h): nothing offers "onednn".
#include "engine/ops/onednn.h"

namespace dltune::engine {

bool onednn_available() { return false; }
std::string onednn_version() { return ""; }
void onednn_use_one_thread() {}
bool onednn_conv_supported(const OnednnConvShape&, Precision) { return false; }
std::unique_ptr<OnednnConv> make_onednn_conv(const OnednnConvShape&, Precision) { return nullptr; }
std::string onednn_conv_impl(const OnednnConvShape&, Precision) { return ""; }
double onednn_matmul_gflops(int64_t, Precision, double) { return -1.0; }
bool onednn_matmul_supported() { return false; }
void onednn_parallel_matmul(ThreadPool&, bool, bool, int64_t, int64_t, int64_t, const float*,
                            int64_t, const float*, int64_t, bool, float*, int64_t) {}

}  // namespace dltune::engine
