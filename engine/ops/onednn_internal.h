// Shared by the oneDNN files of engine/ops (onednn.cc, onednn_conv.cc): not for other callers.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace dltune::engine::onednn_detail {

// The process's CPU engine (created once, after limiting oneDNN's instruction set to the
// engine's masked CPU features).
dnnl::engine& cpu_engine();

// OpenMP to one thread in the calling thread (once per thread).
void one_thread_here();

}  // namespace dltune::engine::onednn_detail
