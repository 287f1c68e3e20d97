// Bad topology input (one clear sentence, the right error kind, no crash), the live machine,
// DLTUNE_TOPO_XML, the fingerprint and the JSON fields.
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <hwloc.h>
#include <link.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>
#include <sys/stat.h>

#include "topology/tests/test_util.h"

namespace dltune::topology {
namespace {

using testing::load_fixture;
using testing::read_fixture;
using testing::TempFile;

// Loads `text` from a scratch file and returns the error message ("" when it loaded).
std::string load_error(const std::string& text, ErrorKind want = ErrorKind::kInvalidInput) {
  TempFile f(text);
  auto t = load_xml(f.path());
  if (t.ok()) return "";
  EXPECT_EQ(t.error().kind(), want);
  std::string msg = t.error().message();
  const size_t at = msg.find(f.path());
  if (at != std::string::npos) msg.replace(at, f.path().size(), "F");
  return msg;
}

TEST(BadInput, MissingFile) {
  auto t = load_xml("/nonexistent/dir/topo.xml");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(t.error().message(), "topology file '/nonexistent/dir/topo.xml' does not exist");
  EXPECT_EQ(t.error().exit_code(), 2);
}

TEST(BadInput, DirectoryIsBadInput) {
  auto t = load_xml("/tmp");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().exit_code(), 2);
}

TEST(BadInput, EmptyFile) {
  EXPECT_EQ(load_error(""),
            "'F' is empty: give an hwloc XML export such as `lstopo --of xml` writes");
  EXPECT_EQ(load_error(" \n\t\n"),
            "'F' is empty: give an hwloc XML export such as `lstopo --of xml` writes");
}

TEST(BadInput, NotXml) {
  EXPECT_EQ(load_error("Machine (16GB total)\n  Package L#0\n"),
            "'F' is not an XML file: give an hwloc XML export such as `lstopo --of xml` writes");
  EXPECT_EQ(load_error(std::string("\x7f"
                                   "ELF\x02\x01\x01\0\0\0",
                                   10)),
            "'F' is not an XML file: give an hwloc XML export such as `lstopo --of xml` writes");
  EXPECT_EQ(load_error("<?xml version=\"1.0\"?>\n<html><body/></html>\n"),
            "'F' is XML but not an hwloc topology export (no <topology> element)");
}

TEST(BadInput, TruncatedXml) {
  const std::string xml = read_fixture("mpibind_coral-lassen.xml");
  EXPECT_EQ(load_error(xml.substr(0, xml.size() / 3)),
            "'F' is truncated: it ends before </topology>");
}

TEST(BadInput, MalformedXml) {
  std::string xml = read_fixture("mpibind_cts1-pascal.xml");
  xml.replace(xml.find("<object type=\"Package\""), 22, "<object type=\"Packa<<ge\"");
  // Refused by the check before hwloc (xml_check.h), which says where.
  EXPECT_EQ(load_error(xml),
            "'F' is not a valid hwloc XML export: line 28: '<' in an attribute value; export it "
            "again with `lstopo --of xml`");
}

TEST(BadInput, Hwloc3Export) {
  std::string xml = read_fixture("mpibind_cts1-pascal.xml");
  xml.replace(xml.find("<topology version=\"2.0\">"), 24, "<topology version=\"3.0\">");
  EXPECT_EQ(load_error(xml),
            "'F' is an hwloc 3.0 export, which hwloc 2 (used by this dltune) cannot read: "
            "export it again with hwloc 2's lstopo");
}

TEST(BadInput, EmptyTopology) {
  // A well-formed export with nothing in it: hwloc refuses it; a machine without PUs too.
  EXPECT_EQ(load_error("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n</topology>\n"),
            "'F' describes an empty topology (no <object> element): export a whole machine "
            "with `lstopo --of xml`");
  const std::string msg = load_error(
      "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
      "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x0\" complete_cpuset=\"0x0\" "
      "allowed_cpuset=\"0x0\" nodeset=\"0x0\" complete_nodeset=\"0x0\" allowed_nodeset=\"0x0\" "
      "gp_index=\"1\"/>\n</topology>\n");
  EXPECT_EQ(msg,
            "'F' is not a valid hwloc XML export (hwloc rejected it: malformed, or no PU or "
            "NUMA node): export it again with `lstopo --of xml`");
}

TEST(Live, DiscoversThisMachine) {
  auto t = discover();
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->source, "live");
  EXPECT_GE(t->pus, 1);
  EXPECT_FALSE(t->cores.empty());
  EXPECT_GE(t->numa_nodes.size(), 1u);
  const Placement p = place(*t, 0, BindPolicy::kAuto);
  EXPECT_GE(p.ranks.size(), 1u);
  const std::string text = render_text(*t, p);
  if (t->gpus.empty()) {
    EXPECT_NE(text.find("GPUs: none"), std::string::npos) << text;
  }
  if (t->hpc_nic_count() == 0) {
    EXPECT_NE(text.find("HPC NICs: none"), std::string::npos) << text;
  }
}

// The handle a PMIx server reuses is the loaded machine the model was built from.
TEST(Live, DiscoveryKeepsHwlocsTopology) {
  auto plain = discover();
  auto kept = discover_keeping_hwloc();
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  ASSERT_TRUE(kept.ok()) << kept.error().message();
  EXPECT_EQ(fingerprint(kept->model), fingerprint(*plain));
  ASSERT_NE(kept->hwloc, nullptr);
  EXPECT_EQ(hwloc_get_nbobjs_by_type(kept->hwloc.get(), HWLOC_OBJ_PU), kept->model.pus);
  EXPECT_EQ(hwloc_topology_is_thissystem(kept->hwloc.get()), 1);
}

// True when a shared object whose path ends in `/name` is loaded in this process.
bool loaded(const std::string& name) {
  std::string want = "/" + name;
  auto visit = [](dl_phdr_info* info, size_t, void* data) -> int {
    const std::string path = info->dlpi_name != nullptr ? info->dlpi_name : "";
    const auto& w = *static_cast<std::string*>(data);
    return path.size() >= w.size() && path.compare(path.size() - w.size(), w.size(), w) == 0;
  };
  return dl_iterate_phdr(visit, &want) != 0;
}

bool installed(const std::string& plugin) {
  struct stat st;
  return ::stat((std::string(HWLOC_PLUGINS_DIR_FOR_TESTS) + "/" + plugin).c_str(), &st) == 0;
}

TEST(Live, UnusedHwlocPluginsStayUnloadedAndTheEnvironmentUntouched) {
  ASSERT_EQ(getenv("HWLOC_PLUGINS_BLACKLIST"), nullptr) << "the test needs hwloc's default";
  auto kept = discover_keeping_hwloc();  // holds hwloc's plugins loaded during the checks
  ASSERT_TRUE(kept.ok()) << kept.error().message();
  EXPECT_EQ(getenv("HWLOC_PLUGINS_BLACKLIST"), nullptr) << "leaks into the ranks' environment";
  // The control: hwloc did load the plugins it was not told to skip.
  if (installed("hwloc_pci.so")) {
    EXPECT_TRUE(loaded("hwloc_pci.so"));
  }
  EXPECT_FALSE(loaded("hwloc_gl.so"));
  EXPECT_FALSE(loaded("libX11.so.6"));
}

TEST(Live, TopoXmlVariableReplacesDiscovery) {
  const std::string path = testing::data_path("mpibind_g4dnmetal.xml");
  ASSERT_EQ(setenv("DLTUNE_TOPO_XML", path.c_str(), 1), 0);
  auto t = discover_default();
  ASSERT_EQ(setenv("DLTUNE_TOPO_XML", "/nonexistent.xml", 1), 0);
  auto bad = discover_default();
  unsetenv("DLTUNE_TOPO_XML");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->gpus.size(), 8u);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "DLTUNE_TOPO_XML: topology file '/nonexistent.xml' does not exist");
}

// What `dltune topo --export` prints and a launch over hosts reads back (load_xml_text): this
// machine's live export describes this machine (its fingerprint), DLTUNE_TOPO_XML's is that
// file's text, and text that is not an export is refused naming its source.
TEST(Export, ReadBackAsTheSameMachine) {
  auto live = discover();
  ASSERT_TRUE(live.ok()) << live.error().message();
  auto xml = export_default_xml();
  ASSERT_TRUE(xml.ok()) << xml.error().message();
  auto back = load_xml_text(*xml, "host n1 (over ssh)");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->source, "host n1 (over ssh)");
  EXPECT_EQ(fingerprint(*back), fingerprint(*live));
  EXPECT_EQ(back->cores.size(), live->cores.size());

  const std::string path = testing::data_path("mpibind_g4dnmetal.xml");
  ASSERT_EQ(setenv("DLTUNE_TOPO_XML", path.c_str(), 1), 0);
  auto fixture_xml = export_default_xml();
  ASSERT_EQ(setenv("DLTUNE_TOPO_XML", "/nonexistent.xml", 1), 0);
  auto missing = export_default_xml();
  unsetenv("DLTUNE_TOPO_XML");
  ASSERT_TRUE(fixture_xml.ok()) << fixture_xml.error().message();
  EXPECT_EQ(*fixture_xml, read_fixture("mpibind_g4dnmetal.xml"));
  auto g4 = load_xml_text(*fixture_xml, "host g4 (over ssh)");
  ASSERT_TRUE(g4.ok());
  EXPECT_EQ(g4->gpus.size(), 8u);
  EXPECT_EQ(fingerprint(*g4), fingerprint(load_fixture("mpibind_g4dnmetal.xml")));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("DLTUNE_TOPO_XML"), std::string::npos);

  auto bad = load_xml_text("ssh: connect to host n1 port 22: Connection refused\n", "host n1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(bad.error().message().find("host n1"), std::string::npos) << bad.error().message();
}

TEST(Fingerprint, StableForIdenticalNodesAndFreeOfIdentities) {
  const Topology a = load_fixture("mpibind_coral-lassen.xml");
  // Another "node" of the same kind: different serials, addresses, GUIDs and host data.
  std::string xml = read_fixture("mpibind_coral-lassen.xml");
  for (const std::string from : {"506b:4b03:003c:eee8", "08:94:ef:80:05:09", "0x527"}) {
    for (size_t at = xml.find(from); at != std::string::npos; at = xml.find(from, at + 1)) {
      xml.replace(at, from.size(), std::string(from.size(), '1'));
    }
  }
  TempFile other(xml);
  auto b = load_xml(other.path());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fingerprint(a), fingerprint(*b));
  EXPECT_EQ(fingerprint(a).size(), 64u);
  const std::string text = fingerprint_text(a);
  EXPECT_EQ(text.find("mpibind"), std::string::npos);       // no file or host name
  EXPECT_EQ(text.find("0004:04:00.0"), std::string::npos);  // no bus id
  EXPECT_NE(text.find("Tesla V100-SXM2-16GB"), std::string::npos);
}

TEST(Fingerprint, ChangesWhenTuningRelevantHardwareDiffers) {
  const std::string base = fingerprint(load_fixture("mpibind_coral-lassen.xml"));
  std::string xml = read_fixture("mpibind_coral-lassen.xml");
  std::string other_model = xml;
  for (size_t at = other_model.find("V100-SXM2-16GB"); at != std::string::npos;
       at = other_model.find("V100-SXM2-16GB", at + 1)) {
    other_model.replace(at, 14, "V100-SXM2-32GB");
  }
  TempFile f(other_model);
  auto t = load_xml(f.path());
  ASSERT_TRUE(t.ok());
  EXPECT_NE(fingerprint(*t), base);
  // Every fixture is a different machine.
  std::set<std::string> all;
  for (const char* name :
       {"hwloc_nvidiaDGX2.xml", "hwloc_power8gpudistances.xml", "mpibind_coral-lassen.xml",
        "mpibind_cts1-pascal.xml", "mpibind_cts1-quartz-smt1.xml", "mpibind_eas-tioga.xml",
        "mpibind_g4dnmetal.xml"}) {
    all.insert(fingerprint(load_fixture(name)));
  }
  EXPECT_EQ(all.size(), 7u);
}

TEST(Json, HasTheDocumentedFields) {
  const Topology t = load_fixture("mpibind_coral-lassen.xml");
  const auto j = nlohmann::json::parse(render_json(t, place(t, 0, BindPolicy::kAuto)));
  EXPECT_EQ(j.at("packages"), 2);
  EXPECT_EQ(j.at("numa_nodes"), 2);
  EXPECT_EQ(j.at("cores"), 40);
  EXPECT_EQ(j.at("pus"), 160);
  const auto& g = j.at("gpus").at(2);
  EXPECT_EQ(g.at("index"), 2);
  EXPECT_EQ(g.at("name"), "cuda2");
  EXPECT_EQ(g.at("busid"), "0035:03:00.0");
  EXPECT_EQ(g.at("vendor"), "nvidia");
  EXPECT_EQ(g.at("model"), "Tesla V100-SXM2-16GB");
  EXPECT_EQ(g.at("numa"), 8);
  EXPECT_EQ(g.at("package"), 8);
  EXPECT_EQ(g.at("closest_nics"), (std::vector<std::string>{"mlx5_2", "mlx5_3"}));
  const auto& n = j.at("nics").at(0);
  EXPECT_EQ(n.at("name"), "mlx5_0");
  EXPECT_EQ(n.at("busid"), "0003:01:00.0");
  EXPECT_EQ(n.at("kind"), "infiniband");
  EXPECT_EQ(n.at("numa"), 0);
  EXPECT_EQ(n.at("hpc"), true);
  EXPECT_EQ(j.at("nics").at(5).at("hpc"), false);
  EXPECT_EQ(j.at("gpu_paths").at(0).at(1), "PIX");
  const auto& r = j.at("placement").at(3);
  EXPECT_EQ(r.at("local_rank"), 3);
  EXPECT_EQ(r.at("gpu"), 3);
  EXPECT_EQ(r.at("nic"), "mlx5_3");
  EXPECT_EQ(r.at("cpus").size(), 40u);
  EXPECT_EQ(j.at("fingerprint"), fingerprint(t));
}

}  // namespace
}  // namespace dltune::topology
