// The hwloc XML check (xml_check.h): every real export passes; every export hwloc 2.9 would
// crash on, and every malformed or hostile one, is refused with one sentence before hwloc sees
// it.
#include "topology/xml_check.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topology/hwloc_source.h"
#include "topology/tests/test_util.h"

namespace dltune::topology {
namespace {

using testing::data_path;
using testing::read_fixture;

const char* const kFixtures[] = {"hwloc_nvidiaDGX2.xml",         "hwloc_power8gpudistances.xml",
                                 "mpibind_coral-lassen.xml",     "mpibind_cts1-pascal.xml",
                                 "mpibind_cts1-quartz-smt1.xml", "mpibind_eas-tioga.xml",
                                 "mpibind_g4dnmetal.xml"};

// The check's message for `xml`, "" when it passes; the path shows as F.
std::string problem(const std::string& xml, const XmlLimits& limits = {}) {
  Status s = check_hwloc_xml(xml, "F", limits);
  if (s.ok()) return "";
  EXPECT_EQ(s.error().kind(), ErrorKind::kInvalidInput);
  return s.error().message();
}

// A small valid export: one Machine, one NUMA node, two cores of one PU each.
std::string small(const std::string& machine_sets =
                      "cpuset=\"0x3\" complete_cpuset=\"0x3\" "
                      "nodeset=\"0x1\" complete_nodeset=\"0x1\"",
                  const std::string& extra = "") {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<topology version=\"2.0\">\n"
         "<object type=\"Machine\" os_index=\"0\" " +
         machine_sets +
         " gp_index=\"1\">\n"
         "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\" local_memory=\"1000000\"/>\n"
         "<object type=\"Core\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\">\n"
         "<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"4\"/>\n</object>\n"
         "<object type=\"Core\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"5\">\n"
         "<object type=\"PU\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"6\"/>\n</object>\n" +
         extra + "</object>\n</topology>\n";
}

TEST(XmlCheck, EveryRealExportPasses) {
  for (const char* f : kFixtures) EXPECT_EQ(problem(read_fixture(f)), "") << f;
  EXPECT_EQ(problem(small()), "");
}

TEST(XmlCheck, ThisMachinesLiveExportPasses) {
  // What the live cache saves and reloads: hwloc 2.9's own export of this machine.
  auto live = detail::open_live();
  ASSERT_TRUE(live.ok()) << live.error().message();
  auto xml = detail::export_xml(live->get());
  ASSERT_TRUE(xml.ok()) << xml.error().message();
  EXPECT_EQ(problem(*xml), "");
}

// The reported crash (an 827-byte version of the 806-byte reproducer): a Machine without
// complete_cpuset holding two Cores with PUs and a NUMANode. lstopo 2.9 dies on it (SIGSEGV).
TEST(XmlCheck, TheCrashReproducerIsRefusedBeforeHwloc) {
  const std::string path = data_path("hostile/machine-without-complete-cpuset.xml");
  auto text = paths::read_file(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(problem(*text),
            "'F' is not a valid hwloc XML export: line 3: the Machine object has no "
            "complete_cpuset attribute; export it again with `lstopo --of xml`");
  auto t = load_xml(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().exit_code(), 2);
}

// Deleting any one required set from any CPU-side object of a real export is refused, naming
// the attribute (36 of 72 such deletions crashed hwloc in the report; 10 of 54 on the DGX-2).
TEST(XmlCheck, EveryDeletedRequiredSetIsRefused) {
  for (const char* fixture : {"hwloc_nvidiaDGX2.xml", "mpibind_cts1-pascal.xml"}) {
    const std::string xml = read_fixture(fixture);
    int deletions = 0;
    for (const char* attr : {"cpuset", "complete_cpuset", "nodeset", "complete_nodeset"}) {
      // Every ` attr="..."` of an <object> tag (<cpukind cpuset=...> is not one). No std::regex:
      // GCC 12's libstdc++ regex trips -Wmaybe-uninitialized under AddressSanitizer.
      const std::string needle = std::string(" ") + attr + "=\"";
      for (size_t at = xml.find(needle); at != std::string::npos; at = xml.find(needle, at + 1)) {
        const size_t tag = xml.rfind('<', at);
        if (xml.compare(tag, 8, "<object ") != 0) continue;
        const size_t end = xml.find('"', at + needle.size()) + 1;
        std::string cut = xml;
        cut.erase(at, end - at);
        const std::string msg = problem(cut);
        EXPECT_NE(msg.find(std::string("has no ") + attr + " attribute"), std::string::npos)
            << fixture << " without the " << attr << " at byte " << at << ": " << msg;
        ++deletions;
      }
    }
    EXPECT_GT(deletions, 100) << fixture;
  }
}

TEST(XmlCheck, InconsistentSetsAreRefused) {
  struct Case {
    std::string xml, want;
  };
  const std::string pu0 =
      "<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
      "nodeset=\"0x1\" complete_nodeset=\"0x1\"/>";
  const std::vector<Case> cases = {
      {small("cpuset=\"0x3\" complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\""),
       "line 3: the Machine object's cpuset is not within its complete_cpuset"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x3\" complete_nodeset=\"0x1\""),
       "line 3: the Machine object's nodeset is not within its complete_nodeset"},
      {small("cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\""),
       "line 4: the NUMANode object's cpuset is not within its parent's"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
             "allowed_nodeset=\"5x1\""),
       "line 3: the Machine object has allowed_nodeset \"5x1\", not an hwloc bitmap such as "
       "0x000000ff,0xffffffff"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
             "allowed_cpuset=\"0x7\""),
       "line 3: the Machine object's allowed_cpuset is not within its complete_cpuset"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"zz\" complete_nodeset=\"0x1\""),
       "line 3: the Machine object has nodeset \"zz\", not an hwloc bitmap such as "
       "0x000000ff,0xffffffff"},
      {small("cpuset=\"0x123456789\" complete_cpuset=\"0x3\" nodeset=\"0x1\" "
             "complete_nodeset=\"0x1\""),
       "line 3: the Machine object has cpuset \"0x123456789\", not an hwloc bitmap such as "
       "0x000000ff,0xffffffff"},
      {small("cpuset=\"\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\""),
       "line 3: the Machine object has cpuset \"\", not an hwloc bitmap such as "
       "0x000000ff,0xffffffff"},
      // hwloc 2.9 counts a bitmap's words from its second character: a leading comma fails
      // an assert() inside it (abort), in an object's sets and in a CPU kind's alike.
      {small("cpuset=\",0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\""),
       "line 3: the Machine object has cpuset \",0x3\", not an hwloc bitmap such as "
       "0x000000ff,0xffffffff"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"",
             "<cpukind cpuset=\",0x3\"/>\n"),
       "line 11: <cpukind> has cpuset \",0x3\", not an hwloc bitmap such as "
       "0x000000ff,0xffffffff"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"",
             "<memattr_value initiator_cpuset=\"0xf...f,0x3g\"/>\n"),
       "line 11: <memattr_value> has initiator_cpuset \"0xf...f,0x3g\", not an hwloc bitmap "
       "such as 0x000000ff,0xffffffff"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"",
             "<object type=\"PU\" os_index=\"1\" cpuset=\"0x1\" complete_cpuset=\"0x1\" "
             "nodeset=\"0x1\" complete_nodeset=\"0x1\"/>\n"),
       "line 11: the PU object P#1 has a complete_cpuset that is not exactly that PU"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"",
             "<object type=\"Bridge\" os_index=\"0\">" + pu0 + "</object>\n"),
       "line 11: the PU object sits inside an I/O or Misc object"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"",
             "<object type=\"Socket2\"/>\n"),
       "line 11: unknown object type 'Socket2'"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\" "
             "os_index=\"-1\""),
       "line 3: attribute os_index given twice"},
      {small("cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\"",
             "<object type=\"Misc\" gp_index=\"99999999999\"/>\n"),
       "line 11: the Misc object has gp_index \"99999999999\", not a small integer"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(problem(c.xml), "'F' is not a valid hwloc XML export: " + c.want +
                                  "; export it again with `lstopo --of xml`")
        << c.xml;
  }
}

TEST(XmlCheck, MalformedAndHostileXmlIsRefused) {
  const std::string ok = small();
  struct Case {
    std::string xml, want;
  };
  std::string deep = "<topology version=\"2.0\">";
  for (int i = 0; i < 100000; ++i) deep += "<info>";
  const std::vector<Case> cases = {
      {"<topology><object type=\"Machine\"", "line 1: unterminated tag <object>"},
      {"<topology></object>", "line 1: </object> does not close <topology>"},
      {ok + "<topology/>", "line 13: a second document element"},
      {"<!DOCTYPE t [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;\">]><topology/>",
       "line 1: a DOCTYPE with an internal subset is not accepted"},
      {"<topology a=\"&b;\"/>",
       "line 1: a bad entity or character reference in an attribute value"},
      {"<topology a=\"&#0;\"/>",
       "line 1: a bad entity or character reference in an attribute value"},
      {"<topology a=\"x\xff\"/>", "line 1: bytes that are not UTF-8"},
      {"<topology>\n<info>\x14</info></topology>", "line 2: a control character (byte 20)"},
      {"\n<?xml version=\"1.0\"?><topology/>",
       "line 2: an XML declaration after the start of the file"},
      {"<topology a=b/>", "line 1: an attribute value must be quoted"},
      {"<topology a=\"1\"b=\"2\"/>", "line 1: expected white space between attributes"},
      {"<html/>", "line 1: unknown element <html>"},
      {"<root/>", "line 1: the document element is <root>, not <topology>"},
      {"<topology><:info/></topology>", "line 1: unknown element <:info>"},
      {"<topology><x:info/></topology>", "line 1: unknown element <x:info>"},
      {deep, "line 1: elements nested deeper than 64 levels"},
      {"<topology>\n<object type=\"Core\" cpuset=\"0x1\" complete_cpuset=\"0x1\" nodeset=\"0x1\" "
       "complete_nodeset=\"0x1\"/></topology>",
       "line 2: the root object is a Core"},
      {"<topology><info name=\"a\"><object type=\"Machine\"/></info></topology>",
       "line 1: an <object> inside another element than <object>"},
      {"<topology version=\"2.0\"></topology>", "no root <object>"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(problem(c.xml), "'F' is not a valid hwloc XML export: " + c.want +
                                  "; export it again with `lstopo "
                                  "--of xml`")
        << c.xml.substr(0, 80);
  }
  XmlLimits tight;
  tight.max_elements = 5;
  EXPECT_NE(problem(ok, tight).find("more than 5 elements"), std::string::npos);
  tight = XmlLimits{};
  tight.max_bytes = 100;
  EXPECT_NE(problem(ok, tight).find("larger than"), std::string::npos);
}

TEST(XmlCheck, EntitiesAndCommentsAreRead) {
  // What hwloc itself writes: escaped attribute values, comments, a DOCTYPE without a subset.
  std::string xml = small();
  xml.insert(xml.find("<topology"), "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<!-- x -->\n");
  xml.insert(xml.find("</object>\n</topology>"),
             "<info name=\"CPUModel\" value=\"A &amp; B &lt;x&gt; &#x263A; &#65;\"/>\n");
  EXPECT_EQ(problem(xml), "");
}

}  // namespace
}  // namespace dltune::topology
