#include "predict/devices.h"

#include "common/strings.h"

namespace dltune::predict {

const std::vector<Device>& devices() {
  static const std::vector<Device> table = {
      {"p100", "NVIDIA Tesla P100 SXM2 16GB (FP32)", 10.6, 0.5, 0.5, 732, 80,
       "NVIDIA Tesla P100 datasheet (2016)"},
      {"v100", "NVIDIA Tesla V100 SXM2 (tensor cores, mixed precision)", 125, 0.28, 0.35, 900, 150,
       "NVIDIA Tesla V100 datasheet (2017)"},
      {"a100", "NVIDIA A100 SXM4 80GB (dense BF16 tensor)", 312, 0.21, 0.45, 2039, 300,
       "NVIDIA A100 datasheet (2021)"},
      {"h100", "NVIDIA H100 SXM5 80GB (dense BF16 tensor)", 989, 0.09, 0.40, 3350, 450,
       "NVIDIA H100 datasheet (2023)"},
      {"h200", "NVIDIA H200 SXM 141GB (dense BF16 tensor)", 989, 0.10, 0.42, 4800, 450,
       "NVIDIA H200 datasheet (2024)"},
  };
  return table;
}

Result<Device> find_device(std::string_view name) {
  std::vector<std::string> names;
  for (const Device& d : devices()) {
    if (d.name == name) return d;
    names.push_back(d.name);
  }
  return invalid_input("--device: unknown device '" + std::string(name) + "'; known devices are " +
                       strings::join(names, ", "));
}

}  // namespace dltune::predict
