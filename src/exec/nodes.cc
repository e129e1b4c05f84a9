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

namespace rtaccel::exec {
namespace {

constexpr const char* kPrefix = "rtaccel-run-";

// iproute2 lives in sbin, which a user's PATH may not name.
std::string tool_path(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return name;
}

// Runs a program (iproute2's ip, tc, rdma) and waits for it; its stderr,
// when it fails, becomes the error.
Status command(const std::vector<std::string>& argv) {
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) < 0) return Status::os_error("pipe", errno);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    return Status::os_error("fork", err);
  }
  if (pid == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const std::string path = tool_path(argv[0]);
    execvp(path.c_str(), args.data());
    dprintf(STDERR_FILENO, "%s not found (install iproute2)", args[0]);
    _exit(127);
  }
  close(err_pipe[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof(buf))) != 0;) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  }
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  return Status::error("'" + line + "' failed" + (text.empty() ? "" : ": " + text));
}

std::string host_of(size_t link, size_t end) {
  return "10.204." + std::to_string(link) + "." + std::to_string(end + 1);
}

// Namespaces of runs that were killed before they could remove them.
void remove_stale_namespaces() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const long pid = strtol(name.c_str() + strlen(kPrefix), nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) < 0 && errno == ESRCH)
      (void)command({"ip", "netns", "del", name});  // best effort: another run may race for it
  }
}

}  // namespace

NodeNetwork::~NodeNetwork() {
  for (const auto& ns : ns_) (void)command({"ip", "netns", "del", ns});
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
  remove_stale_namespaces();
  const std::string run = std::to_string(getpid());
  for (const auto& node : w.nodes) {
    ns_.push_back(kPrefix + run + "-" + std::to_string(ns_.size()));
    if (Status st = command({"ip", "netns", "add", ns_.back()}); !st)
      return st.context("cannot make node '" + node.name + "''s network namespace");
    if (Status st = command({"ip", "-n", ns_.back(), "link", "set", "lo", "up"}); !st) return st;
  }
  for (size_t l = 0; l < w.links.size(); ++l) {
    const auto& link = w.links[l];
    // Interface names have at most 15 characters, and both ends are made in
    // this namespace first: the run's pid keeps them apart from another run's.
    veth_.push_back("rt" + run + "l" + std::to_string(l));
    const std::string ends[2] = {veth_.back() + "a", veth_.back() + "b"};
    const size_t nodes[2] = {link.a, link.b};
    const std::string what = "link '" + link.name + "'";
    if (Status st = command({"ip", "link", "add", ends[0], "type", "veth", "peer", "name", ends[1]}); !st)
      return st.context("cannot make " + what);
    const std::string rate = std::to_string(link.rate_bytes_per_s * 8) + "bit";
    for (int e = 0; e < 2; ++e) {
      const std::string& ns = ns_[nodes[e]];
      Status st = command({"ip", "link", "set", ends[e], "netns", ns});
      if (st) st = command({"ip", "-n", ns, "addr", "add", host_of(l, e) + "/24", "dev", ends[e]});
      if (st) st = command({"ip", "-n", ns, "link", "set", ends[e], "up"});
      // The rate on each end's egress: a link is full duplex. The bucket
      // holds 4 ms at the rate (at least 64 KiB): tbf refills it from a
      // timer, and a smaller one leaves the link idle whenever a busy
      // machine runs that timer late.
      const std::string burst = std::to_string(std::max<uint64_t>(link.rate_bytes_per_s / 250, 64 << 10));
      if (st)
        st = command({"tc", "-n", ns, "qdisc", "add", "dev", ends[e], "root", "tbf", "rate", rate, "burst", burst,
                      "latency", "50ms"});
      if (st && link.transport->rdma_device)
        st = command({"ip", "netns", "exec", ns, "rdma", "link", "add", "rxe" + ends[e], "type", "rxe", "netdev",
                      ends[e]})
                 .context("Soft-RoCE (the rdma_rxe module, and a kernel whose rxe works in namespaces)");
      if (!st) return st.context("cannot set up " + what + " on node '" + w.nodes[nodes[e]].name + "'");
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
  if (l.transport->one_machine) return scheme + "rtaccel-run-" + std::to_string(run_id) + "-" + std::to_string(link);
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
