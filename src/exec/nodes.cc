#include "exec/nodes.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/netns.h"
#include "exec/leftovers.h"

namespace rtaccel::exec {
namespace {

std::string tool_path(const std::string& name) {
  char buf[256];
  return rtaccel_tool_path(name.c_str(), buf, sizeof(buf));
}

// Runs a program (iproute2's ip, tc, rdma) and waits for it; what it said,
// when it fails, becomes the error.
Status command(const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  for (const auto& a : argv) args.push_back(a.c_str());
  args.push_back(nullptr);
  char why[768];
  return rtaccel_tool(args.data(), why, sizeof(why)) ? Status::error(why) : Status();
}

std::string host_of(size_t link, size_t end) {
  return "10.204." + std::to_string(link) + "." + std::to_string(end + 1);
}

}  // namespace

NodeNetwork::~NodeNetwork() {
  for (const auto& ns : ns_) rtaccel_netns_del(ns.c_str());
}

Status NodeNetwork::create(const workload::Workload& w) {
  workload_ = &w;
  std::string local, wire;  // a link of each kind, for the messages
  for (const auto& link : w.links) (link.transport->one_machine ? local : wire) = link.transport->name;
  if (wire.empty()) return Status();
  if (!local.empty())
    return Status::invalid("workload '" + w.name + "': rtaccel run puts the nodes of " + wire +
                           " links in network namespaces, where " + local +
                           " links cannot reach; make every link " + local + ", or none");
  if (w.links.size() > 250) return Status::invalid("rtaccel run joins at most 250 links");
  if (geteuid() != 0)
    return Status::invalid("running nodes joined by " + wire +
                           " links makes network namespaces, which needs root (CAP_NET_ADMIN); or make the "
                           "links shm");
  const std::string run = std::to_string(getpid());
  for (const auto& node : w.nodes) {
    ns_.push_back(kRunPrefix + run + "-" + std::to_string(ns_.size()));
    char why[768];
    if (rtaccel_netns_add(ns_.back().c_str(), why, sizeof(why)))
      return Status::error(why).context("cannot make node '" + node.name + "''s network namespace");
  }
  for (size_t l = 0; l < w.links.size(); ++l) {
    const auto& link = w.links[l];
    // Interface names have at most 15 characters, and both ends are made in
    // this namespace first: the run's pid keeps them apart from another run's.
    veth_.push_back("rt" + run + "l" + std::to_string(l));
    const std::string devs[2] = {veth_.back() + "a", veth_.back() + "b"};
    const std::string addresses[2] = {host_of(l, 0) + "/24", host_of(l, 1) + "/24"};
    const size_t nodes[2] = {link.a, link.b};
    // The rate on each end's egress: a link is full duplex. The bucket
    // holds 4 ms at the rate (at least 64 KiB): tbf refills it from a
    // timer, and a smaller one leaves the link idle whenever a busy machine
    // runs that timer late.
    const std::string rate = std::to_string(link.rate_bytes_per_s * 8) + "bit";
    const uint64_t burst = std::max<uint64_t>(link.rate_bytes_per_s / 250, 64 << 10);
    rtaccel_veth_end ends[2];
    for (int e = 0; e < 2; ++e)
      ends[e] = {ns_[nodes[e]].c_str(), devs[e].c_str(), addresses[e].c_str(), rate.c_str(), burst, 50};
    char why[768];
    if (rtaccel_veth_join(ends, why, sizeof(why)))
      return Status::error(why).context("cannot make link '" + link.name + "'");
    for (int e = 0; e < 2 && link.transport->rdma_device; ++e) {
      Status st = command({"ip", "netns", "exec", ns_[nodes[e]], "rdma", "link", "add", "rxe" + devs[e], "type", "rxe",
                           "netdev", devs[e]})
                      .context("Soft-RoCE (the rdma_rxe module, and a kernel whose rxe works in namespaces)");
      if (!st) return st.context("cannot set up link '" + link.name + "' on node '" + w.nodes[nodes[e]].name + "'");
    }
  }
  return Status();
}

Status NodeNetwork::enter(size_t node) const {
  if (ns_.empty()) return Status();
  const std::string path = "/run/netns/" + ns_[node];
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::os_error("cannot open " + path, errno);
  const int rc = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (rc < 0) return Status::os_error("cannot enter node '" + workload_->nodes[node].name + "''s namespace", err);
  return Status();
}

std::string NodeNetwork::listen_address(size_t link, size_t node, unsigned run_id) const {
  const auto& l = workload_->links[link];
  const std::string scheme = std::string(l.transport->name) + ":";
  if (l.transport->one_machine) return scheme + kRunPrefix + std::to_string(run_id) + "-" + std::to_string(link);
  return scheme + host_of(link, node == l.a ? 0 : 1) + ":0";
}

std::string NodeNetwork::connect_address(size_t link, size_t node, unsigned port, unsigned run_id) const {
  const auto& l = workload_->links[link];
  if (l.transport->one_machine) return listen_address(link, node, run_id);
  // The other end: the one that listens.
  const size_t end = node == l.a ? 1 : 0;
  return std::string(l.transport->name) + ":" + host_of(link, end) + ":" + std::to_string(port);
}

std::vector<std::string> NodeNetwork::run_in(size_t node) const {
  if (ns_.empty()) return {};
  return {tool_path("ip"), "netns", "exec", ns_[node]};
}

std::string NodeNetwork::host(size_t link, size_t node) const {
  return host_of(link, node == workload_->links[link].a ? 0 : 1);
}

Status NodeNetwork::take_down(size_t link) const {
  if (veth_.empty())
    return Status::invalid("link '" + workload_->links[link].name + "' is shared memory: only links over veth go down");
  const auto& l = workload_->links[link];
  Status st = command({"ip", "-n", ns_[l.a], "link", "set", veth_[link] + "a", "down"});
  if (st) st = command({"ip", "-n", ns_[l.b], "link", "set", veth_[link] + "b", "down"});
  return st;
}

}  // namespace rtaccel::exec
