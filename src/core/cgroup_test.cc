// The memory a process's cgroups leave it, read from a tree made here as a
// cgroup v2 host, a cgroup v1 host and a container show them.
#include "core/cgroup.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A folder of its own: the mounts' points, /proc/self's two files.
class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rtaccel-cgroup-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // FILE (under the folder) holding TEXT, its folders made.
  void write(const std::string& file, const std::string& text) {
    const std::filesystem::path path = root_ + "/" + file;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  // A mountinfo line: the hierarchy's ROOT (the cgroup the mount shows as
  // its top) mounted at POINT under the folder.
  std::string mount(const std::string& root, const std::string& point, const std::string& type,
                    const std::string& options) {
    return "35 24 0:30 " + root + " " + root_ + "/" + point + " rw,nosuid,nodev,noexec,relatime shared:9 - " +
           type + " cgroup " + options + "\n";
  }
  uint64_t left(const std::string& cgroups, const std::string& mounts) {
    write("self/cgroup", cgroups);
    write("self/mountinfo", "22 1 254:1 / / rw,relatime - ext4 /dev/vda rw\n" + mounts);
    return rtaccel_cgroup_memory_left((root_ + "/self/cgroup").c_str(), (root_ + "/self/mountinfo").c_str());
  }
  static std::string bytes(uint64_t n) { return std::to_string(n) + "\n"; }

  std::string root_;
};

TEST_F(FakeProc, V2TheLeastAnyGroupAboveLeavesWithItsFileCacheCountedAsFree) {
  const std::string mounts = mount("/", "v2", "cgroup2", "rw,nsdelegate");
  // A limit of 1 GiB on the parent, 700 MiB used of which 200 MiB cache:
  // 524 MiB left there. None on the process's own group.
  write("v2/cgroup.controllers", "cpu memory\n");
  write("v2/svc/memory.max", bytes(1024 * kMiB));
  write("v2/svc/memory.current", bytes(700 * kMiB));
  write("v2/svc/memory.stat", "anon 500\nfile 1\nactive_file " + std::to_string(150 * kMiB) +
                                  "\ninactive_file " + std::to_string(50 * kMiB) + "\n");
  write("v2/svc/app/memory.max", "max\n");
  write("v2/svc/app/memory.current", bytes(10 * kMiB));
  EXPECT_EQ(left("0::/svc/app\n", mounts), 524 * kMiB);
  // The process's own group limited further: its figure, the lesser.
  write("v2/svc/app/memory.max", bytes(64 * kMiB));
  EXPECT_EQ(left("0::/svc/app\n", mounts), 54 * kMiB);
  // Over its limit (the kernel reclaims or kills): nothing left.
  write("v2/svc/app/memory.current", bytes(80 * kMiB));
  EXPECT_EQ(left("0::/svc/app\n", mounts), 0u);
  // The root group has no limit files: no limit.
  EXPECT_EQ(left("0::/\n", mounts), UINT64_MAX);
}

TEST_F(FakeProc, V1TheMemoryControllersHierarchyAndItsLargestNumberForNoLimit) {
  const std::string mounts = mount("/", "cpu", "cgroup", "rw,cpu,cpuacct") +
                             mount("/", "memory", "cgroup", "rw,memory") +
                             mount("/", "unified", "cgroup2", "rw,nsdelegate");
  const std::string cgroups = "5:cpu,cpuacct:/other\n4:memory:/job\n0::/\n";
  // The cpu hierarchy's group has files of that name too: not read.
  write("cpu/other/memory.limit_in_bytes", bytes(kMiB));
  write("cpu/other/memory.usage_in_bytes", bytes(0));
  write("memory/job/memory.limit_in_bytes", "9223372036854771712\n");
  write("memory/job/memory.usage_in_bytes", bytes(300 * kMiB));
  EXPECT_EQ(left(cgroups, mounts), UINT64_MAX);
  write("memory/job/memory.limit_in_bytes", bytes(512 * kMiB));
  write("memory/job/memory.stat", "cache 1\ntotal_inactive_file " + std::to_string(100 * kMiB) +
                                      "\ntotal_active_file 0\n");
  EXPECT_EQ(left(cgroups, mounts), 312 * kMiB);
}

TEST_F(FakeProc, AContainerSeesItsOwnGroupAsTheMountsTop) {
  // /proc/self/cgroup names the group from the host's top; the container's
  // mount shows that group at its mount point.
  const std::string mounts = mount("/docker/0123abcd", "memory", "cgroup", "ro,memory");
  write("memory/memory.limit_in_bytes", bytes(256 * kMiB));
  write("memory/memory.usage_in_bytes", bytes(56 * kMiB));
  EXPECT_EQ(left("4:memory:/docker/0123abcd\n", mounts), 200 * kMiB);
  // A process in a group below it.
  write("memory/worker/memory.limit_in_bytes", "9223372036854771712\n");
  write("memory/worker/memory.usage_in_bytes", bytes(6 * kMiB));
  EXPECT_EQ(left("4:memory:/docker/0123abcd/worker\n", mounts), 200 * kMiB);
  // Another container's group, whose name begins as this one's does, is
  // not under this mount.
  EXPECT_EQ(left("4:memory:/docker/0123abcdef\n", mounts), UINT64_MAX);
}

TEST_F(FakeProc, NoMemoryHierarchyMountedNoLimit) {
  EXPECT_EQ(left("1:cpu:/\n0::/\n", mount("/", "cpu", "cgroup", "rw,cpu")), UINT64_MAX);
  EXPECT_EQ(left("", ""), UINT64_MAX);
}

TEST(MemoryAvailable, NoMoreThanTheMachineHasFree) {
  unsigned long long kb = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string name; meminfo >> name >> kb && name != "MemAvailable:";) meminfo.ignore(256, '\n');
  const uint64_t available = rtaccel_memory_available();
  EXPECT_GT(available, 0u);
  // MemAvailable moves between the two reads: a margin of 64 MiB.
  EXPECT_LE(available, (uint64_t(kb) << 10) + 64 * kMiB);
}

}  // namespace
