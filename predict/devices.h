// The devices `dltune predict --device NAME` knows: published peak rates of NVIDIA's data-centre
// GPUs and the fraction of peak a training step reaches.
//
// Where the numbers come from. Peak rates and NVLink bandwidths are the vendor datasheets' (SXM
// parts): P100 (Tesla P100 datasheet, 2016: 10.6 TFLOP/s FP32, 21.2 FP16, 732 GB/s HBM2, NVLink 1
// at 160 GB/s both directions), V100 (Tesla V100 datasheet, 2017: 15.7 FP32, 125 tensor FP16,
// 900 GB/s, NVLink 2 at 300 GB/s), A100 80GB (A100 datasheet, 2021: 19.5 FP32, 312 dense tensor
// BF16/FP16, 2,039 GB/s, NVLink 3 at 600 GB/s), H100 SXM (H100 datasheet, 2023: 67 FP32, 989
// dense tensor BF16, 3.35 TB/s, NVLink 4 at 900 GB/s), H200 SXM (H200 datasheet, 2024: H100's
// compute, 4.8 TB/s, 900 GB/s). The "both directions" NVLink figures are halved for one
// direction, which is what an allreduce's transfers use.
//
// The fraction of peak is an assumption, not a datasheet figure: what frameworks' published
// training reaches of the rate the step runs at (FP32 on P100, tensor-core mixed precision from
// V100 on), counting a multiply-add as two operations and a training step as three forward
// passes, for convolutional networks and transformers apart (convolutions reach far less of a
// tensor-core peak). CNNs: ResNet-50 on a P100 at 219 images/s (TensorFlow's benchmarks, May
// 2017, DGX-1, batch 64) at 24.6 GFLOP an image is 5.4 TFLOP/s, 0.5 of FP32 peak; about 1,400,
// 2,700 and 3,600 images/s on V100, A100 and H100 in mixed precision (NVIDIA's
// DeepLearningExamples and MLPerf-class results, rounded) are 0.28, 0.21 and 0.09 of their
// tensor peaks. Transformers: the model FLOP utilisation large-model training reports, about
// 0.35 (V100), 0.45 (A100), 0.40 (H100). Every prediction made from this table says so;
// `--single-sps` replaces it with a measured throughput.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace dltune::predict {

struct Device {
  std::string name;         // "h100"
  std::string description;  // "NVIDIA H100 SXM5 80GB"
  double peak_tflops = 0;   // the rate training runs at (FP32 on P100, dense tensor otherwise)
  double fraction_cnn = 0;  // of peak_tflops a CNN's training step reaches (assumed)
  double fraction_transformer = 0;  // the same for a transformer (assumed)
  double memory_gbps = 0;           // HBM bandwidth
  double nvlink_gbps = 0;           // one direction, per GPU
  std::string source;               // the datasheet
  double fraction(bool transformer) const {
    return transformer ? fraction_transformer : fraction_cnn;
  }
  double effective_flops(bool transformer) const {
    return peak_tflops * 1e12 * fraction(transformer);
  }
};

// The table, in age order.
const std::vector<Device>& devices();
// Errors (invalid_input, exit 2): an unknown name, listing the known ones.
Result<Device> find_device(std::string_view name);

}  // namespace dltune::predict
