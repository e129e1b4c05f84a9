// rtaccel-server's gateway for clients on other nodes (internal).
//
// It listens on a tcp: or rdma: address of the net layer for the peers the
// policy names (accel/policy.h). Each remote client is a session: its
// registrations are checked against the policy's rule for the peer's
// address, then registered with this server through its Unix socket, as a
// local client of the server's own process. So admission control, buckets
// and device assignment are the same for remote and local clients. Per
// registration a thread, at its callback's SCHED_FIFO priority, takes each
// request off the link, runs it, and sends the response back at the chain's
// priority on the wire (accel/remote.h).
//
// A client that dies or whose link fails ends its session: its requests
// finish, its registrations go and admission control forgets them.
#ifndef RTACCEL_ACCEL_GATEWAY_H_
#define RTACCEL_ACCEL_GATEWAY_H_

#include <memory>
#include <string>

#include "accel/policy.h"
#include "rtaccel/status.hpp"

namespace rtaccel::accel {

class Gateway {
 public:
  // Listens on `address` (tcp:HOST:PORT or rdma:HOST:PORT; port 0 picks
  // one) for the policy's peers; registrations go to the server at
  // `server_socket`.
  static Expected<std::unique_ptr<Gateway>> start(const std::string& address, const std::string& server_socket,
                                                  const Policy& policy, bool verbose);
  virtual ~Gateway() = default;  // ends every session
  // The address it listens on, its port resolved.
  virtual std::string address() const = 0;
};

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_GATEWAY_H_
