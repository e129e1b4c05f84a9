// The nodes of a multi-node run on one machine (internal).
//
// Over tcp and rdma links, each node gets a network namespace of its own and
// each link a veth pair between its two nodes' namespaces, whose two ends are
// limited to the link's rate by tc tbf: the topics of a link share one
// bottleneck queue, as they would share a NIC, and no traffic takes a
// shortcut through loopback. An rdma link adds a Soft-RoCE (rxe) device on
// each end. Nodes joined by shm links are processes of one namespace (an shm
// link's rendezvous is an abstract socket, which a namespace would hide), so
// a workload has either shm links only or none.
#ifndef RTACCEL_EXEC_NODES_H_
#define RTACCEL_EXEC_NODES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "rtaccel/status.hpp"
#include "rtaccel/workload.hpp"

namespace rtaccel::exec {

class NodeNetwork {
 public:
  NodeNetwork() = default;
  NodeNetwork(const NodeNetwork&) = delete;
  NodeNetwork& operator=(const NodeNetwork&) = delete;
  ~NodeNetwork();  // removes the namespaces (and with them the links)

  // Makes the namespaces and links of `w` (nothing for one node or shm
  // links); an error says what could not be made and why. Namespaces left by
  // an earlier run that was killed are removed first.
  Status create(const workload::Workload& w);

  // In a forked child: moves the calling process into `node`'s namespace
  // (nothing when nodes share this one).
  Status enter(size_t node) const;

  // Where link `link`'s bridge on `node` listens ("tcp:10.204.0.1:0"), and
  // the host its other end connects to.
  std::string listen_address(size_t link, size_t node, unsigned run_id) const;
  std::string connect_address(size_t link, size_t node, unsigned port, unsigned run_id) const;

  // The command prefix that starts a program in `node`'s namespace
  // (`ip netns exec NS`); empty when nodes share this one.
  std::vector<std::string> run_in(size_t node) const;

  // The address of `node`'s end of link `link` (tcp and rdma links).
  std::string host(size_t link, size_t node) const;

  // The namespace of a node ("" without namespaces), for the summary.
  std::string namespace_of(size_t node) const { return ns_.empty() ? "" : ns_[node]; }

  // Takes link `link` down (both ends of its veth pair): what a cut cable
  // does. Only links over veth can be taken down.
  Status take_down(size_t link) const;

 private:
  const workload::Workload* workload_ = nullptr;
  std::vector<std::string> ns_;     // per node; empty: one namespace
  std::vector<std::string> veth_;   // per link: its two ends, "NAMEa" / "NAMEb"
};

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_NODES_H_
