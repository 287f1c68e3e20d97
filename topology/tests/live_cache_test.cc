// This boot's saved discovery (topology/live_cache.h): it gives the same model as discovering,
// it is rediscovered when damaged, its signature describes this machine, and it is kept only in
// a private directory.
#include "topology/live_cache.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"
#include "topology/topology.h"

namespace dltune::topology {
namespace {

namespace fs = std::filesystem;

// A scratch directory, removed with everything in it when the object goes away.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/dltune-topo-cache-test-XXXXXX";
    path_ = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
    EXPECT_FALSE(path_.empty());
  }
  ~ScratchDir() { fs::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Everything dltune shows of a machine: the whole JSON, fingerprint and placement included.
std::string everything(hwloc_topology_t t) {
  auto model = detail::build_model(t, "live", true);
  EXPECT_TRUE(model.ok()) << model.error().message();
  if (!model) return "";
  return render_json(*model, place(*model, 2, BindPolicy::kAuto));
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  return out;
}

TEST(LiveCache, SavedDiscoveryGivesTheSameMachine) {
  ScratchDir dir;
  bool hit = true;
  auto first = detail::open_live_cached(dir.path(), &hit);
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_FALSE(hit) << "an empty directory cannot hold a saved discovery";
  ASSERT_EQ(files_in(dir.path()).size(), 1u) << "the discovery was not saved";

  auto second = detail::open_live_cached(dir.path(), &hit);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE(hit);
  EXPECT_EQ(files_in(dir.path()).size(), 1u);
  EXPECT_EQ(hwloc_topology_is_thissystem(second->get()), 1) << "binding would be a no-op";
  auto live = detail::open_live();
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(everything(second->get()), everything(live->get()));
  EXPECT_EQ(hwloc_get_nbobjs_by_type(second->get(), HWLOC_OBJ_PCI_DEVICE),
            hwloc_get_nbobjs_by_type(live->get(), HWLOC_OBJ_PCI_DEVICE));
}

TEST(LiveCache, ExportsOfEarlierBootsAreRemoved) {
  ScratchDir dir;
  const std::string old_boot = dir.path() + "/topology-0123456789abcdef.xml";
  const std::string other = dir.path() + "/notes.txt";
  ASSERT_TRUE(paths::write_file_atomic(old_boot, "<topology/>").ok());
  ASSERT_TRUE(paths::write_file_atomic(other, "kept").ok());
  // Last written before this machine booted.
  const std::filesystem::file_time_type long_ago =
      fs::file_time_type::clock::now() - std::chrono::hours(24 * 365 * 30);
  fs::last_write_time(old_boot, long_ago);
  fs::last_write_time(other, long_ago);
  ASSERT_TRUE(detail::open_live_cached(dir.path()).ok());
  EXPECT_FALSE(fs::exists(old_boot));
  EXPECT_TRUE(fs::exists(other)) << "only the cache's own files may be removed";
  EXPECT_EQ(files_in(dir.path()).size(), 2u);
}

TEST(LiveCache, DamagedExportIsRediscoveredAndReplaced) {
  ScratchDir dir;
  ASSERT_TRUE(detail::open_live_cached(dir.path()).ok());
  const std::string saved = files_in(dir.path()).at(0);
  const auto good = paths::read_file(saved);
  ASSERT_TRUE(good.ok());
  for (const std::string& bad : {std::string("<topology><object type=\"Machine\">"),
                                 std::string("not xml at all"), std::string()}) {
    ASSERT_TRUE(paths::write_file_atomic(saved, bad).ok());
    bool hit = true;
    auto t = detail::open_live_cached(dir.path(), &hit);
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_FALSE(hit) << "used a damaged export: '" << bad << "'";
    auto now = paths::read_file(saved);
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(*now, *good) << "the damaged export was not replaced";
  }
}

TEST(LiveCache, SignatureDescribesThisMachine) {
  const std::string sig = detail::live_signature();
  EXPECT_EQ(sig, detail::live_signature()) << "the signature must be stable";
  auto boot = paths::read_file("/proc/sys/kernel/random/boot_id");
  ASSERT_TRUE(boot.ok());
  EXPECT_NE(sig.find("boot " + boot->substr(0, boot->find('\n'))), std::string::npos) << sig;
  EXPECT_NE(sig.find("Cpus_allowed_list:"), std::string::npos) << sig;
  EXPECT_NE(sig.find("MemTotal:"), std::string::npos) << sig;
  for (const auto& e : fs::directory_iterator("/sys/bus/pci/devices")) {
    EXPECT_NE(sig.find("pci " + e.path().filename().string() + " "), std::string::npos) << sig;
  }
  for (const auto& e : fs::directory_iterator("/sys/class/net")) {
    EXPECT_NE(sig.find("net " + e.path().filename().string() + " "), std::string::npos) << sig;
  }
}

// Sets an environment variable for one scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(LiveCache, KeptOnlyInAPrivateDirectoryAndWhenAllowed) {
  ScratchDir runtime;
  ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path().c_str());
  ScopedEnv on("DLTUNE_TOPO_CACHE", nullptr);
  const std::string mine = runtime.path() + "/dltune";
  EXPECT_EQ(detail::cache_dir(), mine);
  struct stat st;
  ASSERT_EQ(::stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  {
    ScopedEnv off("DLTUNE_TOPO_CACHE", "0");
    EXPECT_EQ(detail::cache_dir(), "");
  }
  {
    ScopedEnv hwloc("HWLOC_COMPONENTS", "-pci");  // changes what hwloc would discover
    EXPECT_EQ(detail::cache_dir(), "");
  }
  {
    ScopedEnv quiet("HWLOC_HIDE_ERRORS", "2");  // changes only hwloc's messages
    EXPECT_EQ(detail::cache_dir(), mine);
  }
  ASSERT_EQ(::chmod(mine.c_str(), 0777), 0);  // anyone could plant an export here
  EXPECT_EQ(detail::cache_dir(), "");
  ASSERT_EQ(::chmod(mine.c_str(), 0700), 0);
  EXPECT_EQ(detail::cache_dir(), mine);
  fs::remove(mine);
  fs::create_directory_symlink(runtime.path(), mine);  // a link is not our directory
  EXPECT_EQ(detail::cache_dir(), "");
}

TEST(LiveCache, DiscoverUsesItAndAgreesWithoutIt) {
  ScratchDir runtime;
  ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path().c_str());
  std::string with, without;
  {
    ScopedEnv on("DLTUNE_TOPO_CACHE", nullptr);
    ASSERT_TRUE(discover().ok());  // saves
    auto t = discover();           // loads
    ASSERT_TRUE(t.ok());
    with = fingerprint_text(*t);
    EXPECT_EQ(files_in(runtime.path() + "/dltune").size(), 1u);
  }
  {
    ScopedEnv off("DLTUNE_TOPO_CACHE", "0");
    auto t = discover();
    ASSERT_TRUE(t.ok());
    without = fingerprint_text(*t);
  }
  EXPECT_EQ(with, without);
}

}  // namespace
}  // namespace dltune::topology
