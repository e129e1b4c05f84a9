#include "accel/policy.h"

#include <arpa/inet.h>
#include <pwd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>

#include "core/text_file.h"

namespace rtaccel::accel {
namespace {

std::string where(const std::string& file, const YAML::Node& node) {
  return file + ":" + std::to_string(node.Mark().line + 1) + ": ";
}

std::optional<uid_t> uid_of(const std::string& user) {
  passwd entry;
  passwd* found = nullptr;
  char buffer[4096];
  if (getpwnam_r(user.c_str(), &entry, buffer, sizeof(buffer), &found) != 0 || !found)
    return std::nullopt;
  return found->pw_uid;
}

}  // namespace

Policy Policy::defaults(uid_t server_uid) {
  Policy p;
  p.rules_.push_back({false, 0, {}, 0, 99});
  if (server_uid != 0) p.rules_.push_back({false, server_uid, {}, 0, 99});
  p.origin_ = "the default policy (root and the server's user only; see --policy)";
  return p;
}

Expected<Policy> Policy::load(const std::string& path) {
  auto text = core::read_text_file(path, "policy");
  if (!text) return Status::invalid(path + ": " + text.status().message());
  return parse(*text, path);
}

Expected<Policy> Policy::parse(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::invalid(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap() || !root["allow"] || !root["allow"].IsSequence()) {
    return Status::invalid(file + ":1: expected a mapping with a list 'allow'");
  }
  Policy p;
  p.origin_ = file;
  for (const YAML::Node& item : root["allow"]) {
    const std::string at = where(file, item);
    if (!item.IsMap()) {
      return Status::invalid(at + "each rule is a mapping {user|uid|peer, priorities: [low, high]}");
    }
    for (const auto& kv : item) {
      const std::string key = kv.first.Scalar();
      if (key != "user" && key != "uid" && key != "peer" && key != "priorities") {
        return Status::invalid(where(file, kv.first) + "unknown key '" + key + "'");
      }
    }
    Rule rule;
    try {
      if (int(bool(item["user"])) + int(bool(item["uid"])) + int(bool(item["peer"])) > 1) {
        return Status::invalid(at + "give one of user, uid or peer");
      }
      if (item["peer"]) {
        rule.peer = item["peer"].as<std::string>();
        in6_addr ip6;
        in_addr ip4;
        if (inet_pton(AF_INET, rule.peer.c_str(), &ip4) != 1 && inet_pton(AF_INET6, rule.peer.c_str(), &ip6) != 1)
          return Status::invalid(where(file, item["peer"]) + "peer '" + rule.peer +
                                 "' is not an IP address (a remote client is named by its address)");
      } else if (item["user"]) {
        const std::string user = item["user"].as<std::string>();
        if (user == "*") {
          rule.any_user = true;
        } else if (auto uid = uid_of(user)) {
          rule.uid = *uid;
        } else {
          return Status::invalid(where(file, item["user"]) + "no such user '" + user + "'");
        }
      } else if (item["uid"]) {
        const long uid = item["uid"].as<long>();
        if (uid < 0) {
          return Status::invalid(where(file, item["uid"]) + "uid must not be negative");
        }
        rule.uid = uid_t(uid);
      } else {
        return Status::invalid(at + "a rule needs user, uid or peer");
      }
      const YAML::Node range = item["priorities"];
      if (!range || !range.IsSequence() || range.size() != 2) {
        return Status::invalid(at + "priorities must be [low, high]");
      }
      rule.low = range[0].as<int>();
      rule.high = range[1].as<int>();
      if (rule.low > rule.high) {
        return Status::invalid(where(file, range) + "priorities [low, high] with low > high");
      }
    } catch (const YAML::Exception& e) {
      return Status::invalid(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
    p.rules_.push_back(rule);
  }
  return p;
}

Status Policy::allows(uid_t uid, int priority) const {
  for (const Rule& rule : rules_) {
    if (!rule.peer.empty() || (!rule.any_user && rule.uid != uid)) continue;
    if (priority >= rule.low && priority <= rule.high) return Status();
    return Status::error("uid " + std::to_string(uid) + " may register chain priorities " +
                             std::to_string(rule.low) + ".." + std::to_string(rule.high) + " only, not " +
                             std::to_string(priority) + " (" + origin_ + ")",
                         EPERM);
  }
  return Status::error("uid " + std::to_string(uid) + " may not register with this server (" + origin_ + ")", EPERM);
}

Status Policy::allows_peer(const std::string& address, int priority) const {
  for (const Rule& rule : rules_) {
    if (rule.peer != address) continue;
    if (priority >= rule.low && priority <= rule.high) return Status();
    return Status::error("peer " + address + " may register chain priorities " + std::to_string(rule.low) + ".." +
                             std::to_string(rule.high) + " only, not " + std::to_string(priority) + " (" + origin_ +
                             ")",
                         EPERM);
  }
  return Status::error("peer " + address + " may not register with this server (" + origin_ + ")", EPERM);
}

std::vector<std::string> Policy::peers() const {
  std::vector<std::string> out;
  for (const Rule& rule : rules_)
    if (!rule.peer.empty() && std::find(out.begin(), out.end(), rule.peer) == out.end()) out.push_back(rule.peer);
  return out;
}

}  // namespace rtaccel::accel
