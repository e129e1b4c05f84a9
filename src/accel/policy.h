// Who may register which chain priorities with rtaccel-server (internal).
//
// The server checks a client's credentials (SO_PEERCRED) against rules read
// from a YAML file:
//
//   allow:
//     - {user: root, priorities: [0, 99]}
//     - {uid: 1000, priorities: [1, 50]}
//     - {user: "*", priorities: [0, 10]}
//
// The first rule naming the user (or "*") decides. Without a file, root and
// the server's own user may register any priority and nobody else any.
//
// Clients on other nodes reach the server's gateway (rtaccel-server
// --listen) over the net layer; rules naming a peer's address say which
// priorities it may claim, and only peers named so may connect at all:
//
//     - {peer: 10.204.0.2, priorities: [1, 50]}
#ifndef RTACCEL_ACCEL_POLICY_H_
#define RTACCEL_ACCEL_POLICY_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "rtaccel/status.hpp"

namespace rtaccel::accel {

class Policy {
 public:
  // The default policy for a server running as `server_uid`.
  static Policy defaults(uid_t server_uid);
  // Errors read "file:line: message".
  static Expected<Policy> load(const std::string& path);
  static Expected<Policy> parse(const std::string& text, const std::string& file);

  // Ok when `uid` may register a chain of `priority`; else the reason (EPERM).
  Status allows(uid_t uid, int priority) const;
  // The same for a remote client at `address` (an IP address).
  Status allows_peer(const std::string& address, int priority) const;
  // The addresses of the peers that rules name, for the gateway's listener.
  std::vector<std::string> peers() const;

 private:
  struct Rule {
    bool any_user = false;
    uid_t uid = 0;
    std::string peer;  // a peer rule when not empty
    int low = 0;
    int high = 0;
  };
  std::vector<Rule> rules_;
  std::string origin_;
};

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_POLICY_H_
