// Jobs over ssh hosts (issue 39): mpirun's -H and hostfile syntax, ranks laid by slot, the node
// link's frames, and the head's hub with daemons played by this test over real TCP: hellos
// checked by token, jobs handed out, fences joined in node order, the first failure reported.
#include "launcher/backend/host_list.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/backend/node_hub.h"
#include "launcher/backend/node_link.h"

namespace dltune::launcher {
namespace {

TEST(HostListTest, DashHAsMpirunReadsIt) {
  auto h = parse_host_option("n1:2,n2,node-3.example:16");
  ASSERT_TRUE(h.ok()) << h.error().message();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].name, "n1");
  EXPECT_EQ((*h)[0].slots, 2);
  EXPECT_EQ((*h)[1].slots, 1);  // no ":N": one slot, as Open MPI 4
  EXPECT_EQ((*h)[2].name, "node-3.example");
  EXPECT_EQ((*h)[2].slots, 16);
  for (const char* bad : {"", "n1:", "n1:0", "n1:x", ",n2", "n1:2,", "n 1", "n1:99999", "a/b"}) {
    auto r = parse_host_option(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(r.error().kind(), ErrorKind::kInvalidInput) << bad;
    EXPECT_NE(r.error().message().find("-H"), std::string::npos) << r.error().message();
  }
}

TEST(HostListTest, HostfileLinesCommentsAndErrorsWithTheirLine) {
  auto h = parse_hostfile_text("# cluster\nn1 slots=4\n\n  n2   slots=2 max_slots=8  # gpu\nn3\n",
                               "hosts.txt");
  ASSERT_TRUE(h.ok()) << h.error().message();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].slots, 4);
  EXPECT_EQ((*h)[1].name, "n2");
  EXPECT_EQ((*h)[1].slots, 2);
  EXPECT_EQ((*h)[2].slots, 1);
  auto r = parse_hostfile_text("n1 slots=2\nn2 cpus=4\n", "hosts.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("hosts.txt:2"), std::string::npos) << r.error().message();
  EXPECT_FALSE(parse_hostfile_text("n1 slots=0\n", "f").ok());
  EXPECT_FALSE(parse_hostfile_text("# nothing\n\n", "f").ok());
  auto missing = parse_hostfile("/nonexistent/hosts");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("--hostfile"), std::string::npos);
}

TEST(HostListTest, RanksFillEachHostsSlotsInTurn) {
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 3}, {"a", 1}};  // a named twice: 3
  auto all = map_by_slot(hosts, -1);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].host, "a");
  EXPECT_EQ((*all)[0].first_rank, 0);
  EXPECT_EQ((*all)[0].count, 3);
  EXPECT_EQ((*all)[1].first_rank, 3);
  EXPECT_EQ((*all)[1].count, 3);
  auto four = map_by_slot(hosts, 4);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ((*four)[1].count, 1);
  auto two = map_by_slot(hosts, 2);  // b gets no rank: not part of the job
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->size(), 1u);
  EXPECT_FALSE(map_by_slot(hosts, 0).ok());
  EXPECT_FALSE(map_by_slot({}, 1).ok());
  auto over = map_by_slot(hosts, 7);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message().find("7 ranks but the hosts have 6 slots"), std::string::npos)
      << over.error().message();
}

TEST(HostListTest, ThisHostByItsNames) {
  EXPECT_TRUE(is_this_host("localhost"));
  EXPECT_TRUE(is_this_host("127.0.0.1"));
  char buf[256] = {};
  ASSERT_EQ(gethostname(buf, sizeof buf - 1), 0);
  EXPECT_TRUE(is_this_host(buf));
  EXPECT_FALSE(is_this_host("surely-not-this-host-7f3a"));
}

TEST(NodeLinkTest, FramesSurviveTheWireAndBadOnesAreRefused) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string big(1 << 20, 'x');  // more than the socket holds: sent while read
  Status sent = ok_status();
  std::thread sender(
      [&] { sent = send_frame(sv[0], NodeFrame::kFence, fence_payload("0,1;job:*", big)); });
  auto f = recv_frame(sv[1]);
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent.error().message();
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->type, NodeFrame::kFence);
  std::string key, data;
  ASSERT_TRUE(split_fence_payload(f->payload, &key, &data).ok());
  EXPECT_EQ(key, "0,1;job:*");
  EXPECT_EQ(data, big);
  EXPECT_FALSE(split_fence_payload(std::string("\0\0\1\0ab", 6), &key, &data).ok());
  // An unknown type, then a length past the limit.
  const unsigned char unknown[] = {0, 0, 0, 1, 99};
  ASSERT_EQ(write(sv[0], unknown, sizeof unknown), 5);
  auto u = recv_frame(sv[1]);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().kind(), ErrorKind::kInvalidInput);
  const unsigned char huge[] = {0x7f, 0xff, 0xff, 0xff, 1};
  ASSERT_EQ(write(sv[0], huge, sizeof huge), 5);
  EXPECT_FALSE(recv_frame(sv[1]).ok());
  close(sv[0]);
  auto closed = recv_frame(sv[1]);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.error().kind(), ErrorKind::kPeerFailed);
  close(sv[1]);
}

// A daemon as the hub sees one: connects, says hello, reads its job.
struct FakeDaemon {
  int fd = -1;
  ~FakeDaemon() {
    if (fd >= 0) close(fd);
  }
  void hello(int port, int node, const std::string& token, int master_port = 0) {
    auto c = connect_tcp("127.0.0.1", port, 5000);
    ASSERT_TRUE(c.ok()) << c.error().message();
    fd = *c;
    const nlohmann::json h = {{"node", node}, {"token", token}, {"master_port", master_port}};
    ASSERT_TRUE(send_frame(fd, NodeFrame::kHello, h.dump()).ok());
  }
};

bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

TEST(NodeHubTest, JobsFencesInNodeOrderAndTheFirstFailure) {
  auto hub = NodeHub::open({"n1", "n2"}, "secret");
  ASSERT_TRUE(hub.ok()) << hub.error().message();
  std::vector<NodeHello> seen;
  (*hub)->start(
      [&](const std::vector<NodeHello>& hellos) {
        seen = hellos;
        return std::vector<std::string>{"job-for-n1", "job-for-n2"};
      },
      std::chrono::seconds(20));
  FakeDaemon stranger, d1, d0;
  stranger.hello((*hub)->port(), 0, "wrong");  // refused: not this job's token
  d1.hello((*hub)->port(), 1, "secret");
  d0.hello((*hub)->port(), 0, "secret", 4242);
  auto j0 = recv_frame(d0.fd), j1 = recv_frame(d1.fd);
  ASSERT_TRUE(j0.ok() && j1.ok());
  EXPECT_EQ(j0->payload, "job-for-n1");
  EXPECT_EQ(j1->payload, "job-for-n2");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].master_port, 4242);
  EXPECT_EQ(seen[0].peer, "127.0.0.1");
  EXPECT_FALSE(recv_frame(stranger.fd).ok());  // closed without a job

  // Node 1 enters the fence first; the release holds node 0's data first.
  ASSERT_TRUE(send_frame(d1.fd, NodeFrame::kFence, fence_payload("0,1;j:*", "BBB")).ok());
  EXPECT_FALSE(readable(d1.fd, 200));  // not before node 0 has joined
  ASSERT_TRUE(send_frame(d0.fd, NodeFrame::kFence, fence_payload("0,1;j:*", "AA")).ok());
  for (int fd : {d0.fd, d1.fd}) {
    auto r = recv_frame(fd);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->type, NodeFrame::kRelease);
    std::string key, data;
    ASSERT_TRUE(split_fence_payload(r->payload, &key, &data).ok());
    EXPECT_EQ(key, "0,1;j:*");
    EXPECT_EQ(data, "AABBB");
  }
  // A fence of node 1's ranks alone completes at once.
  ASSERT_TRUE(send_frame(d1.fd, NodeFrame::kFence, fence_payload("1;j:2,j:3", "C")).ok());
  auto solo = recv_frame(d1.fd);
  ASSERT_TRUE(solo.ok());

  EXPECT_TRUE((*hub)->failure().why.empty());
  const nlohmann::json failed = {{"why", "rank 3 on n2 exited with code 3"}, {"exit_code", 3}};
  ASSERT_TRUE(send_frame(d1.fd, NodeFrame::kFailed, failed.dump()).ok());
  ASSERT_TRUE(readable((*hub)->event_fd(), 5000));
  EXPECT_EQ((*hub)->failure().why, "rank 3 on n2 exited with code 3");
  EXPECT_EQ((*hub)->failure().exit_code, 3);
  EXPECT_EQ((*hub)->failed_host(), "n2");
  (*hub)->stop_all("rank 3 on n2 exited with code 3");
  auto stop = recv_frame(d0.fd);
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->type, NodeFrame::kStop);
  EXPECT_EQ(stop->payload, "rank 3 on n2 exited with code 3");
}

TEST(NodeHubTest, ANodeThatNeverConnectsIsNamed) {
  auto hub = NodeHub::open({"n1", "gone"}, "t");
  ASSERT_TRUE(hub.ok());
  (*hub)->start([](const std::vector<NodeHello>&) { return std::vector<std::string>(2); },
                std::chrono::seconds(1));
  FakeDaemon d0;
  d0.hello((*hub)->port(), 0, "t");
  ASSERT_TRUE(readable((*hub)->event_fd(), 10000));
  const Failure f = (*hub)->failure();
  EXPECT_NE(f.why.find("the node daemon on gone did not connect back"), std::string::npos) << f.why;
  EXPECT_EQ((*hub)->failed_host(), "gone");
}

}  // namespace
}  // namespace dltune::launcher
