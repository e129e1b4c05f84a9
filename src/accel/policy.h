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

 private:
  struct Rule {
    bool any_user = false;
    uid_t uid = 0;
    int low = 0;
    int high = 0;
  };
  std::vector<Rule> rules_;
  std::string origin_;
};

}  // namespace rtaccel::accel

#endif  // RTACCEL_ACCEL_POLICY_H_
