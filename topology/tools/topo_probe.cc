// dltune-topo-probe: loads a topology (an hwloc XML export given by --xml, else this machine)
// and writes its model as one line of JSON (topology/model_json.h) on standard output. It is
// the child half of topology/isolated_load.h: hwloc runs here, under the limits the parent set,
// so that a hostile export can only take this process down.
//
// Exit status: 0 with the model on stdout; 2 with one sentence on stdout when the input is
// bad; 1 with one sentence when the machine cannot be discovered.
#include <cstdio>
#include <cstring>
#include <string>

#include "topology/model_json.h"
#include "topology/topology.h"

int main(int argc, char** argv) {
  std::string xml;
  if (argc == 3 && std::strcmp(argv[1], "--xml") == 0) {
    xml = argv[2];
  } else if (argc != 1) {
    std::printf("usage: dltune-topo-probe [--xml FILE]\n");
    return 2;
  }
  auto topo = xml.empty() ? dltune::topology::discover() : dltune::topology::load_xml(xml);
  if (!topo) {
    std::printf("%s\n", topo.error().message().c_str());
    return topo.error().exit_code();
  }
  const std::string out = dltune::topology::model_to_json(*topo);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
