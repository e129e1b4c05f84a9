// rtaccel._core's client of rtaccel-server: rtaccel/accel.h's calls for
// Python, what rtaccel.accel.Client is.
//
// A chain is described as a dict with the words of struct rtaccel_chain_desc
// (name, priority, critical, period_ns, deadline_ns, release, callbacks:
// [{name, executor, executor_core, executor_priority, cpu_ns, wait,
// segments: [{service, wcet_ns, accelerator}], publishes, triggers}]); a key
// it does not have, a name too long or a count over the header's limits is a
// ValueError that names it, before anything is sent.
//
// A registration's buffers are Python buffers over the shared region itself:
// numpy.frombuffer(reg.request_buffer("vecadd"), ...) writes the request
// where the server reads it, without a copy. The region is unmapped when the
// registration ends, so a registration does not end while a buffer of its is
// alive (close() raises BufferError, as mmap's does), nor while another
// thread waits on it. Requests and registrations release the interpreter lock
// for as long as they wait, so that the process' other threads run meanwhile.
#include "accel_client.h"

#include <pybind11/stl.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rtaccel/accel.h"

namespace py = pybind11;

namespace {

// OSError(errno, "WHAT: strerror[: the server's reason]"), or TimeoutError
// and the like where Python has a subclass for the errno (OSError's own
// constructor picks it).
[[noreturn]] void raise_errno(int err, const std::string& what, const char* why = nullptr) {
  std::string text = what + ": " + std::strerror(-err);
  if (why && *why) text += ": " + std::string(why);
  py::object error = py::reinterpret_borrow<py::object>(PyExc_OSError)(-err, text);
  PyErr_SetObject(error.get_type().ptr(), error.ptr());
  throw py::error_already_set();
}

void copy_string(char* out, size_t cap, const std::string& text, const std::string& where) {
  if (text.size() >= cap)
    throw py::value_error(where + ": '" + text + "' is longer than " + std::to_string(cap - 1) + " bytes");
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
}

// Reads a dict's keys off one by one, and says which were not read.
class Fields {
 public:
  Fields(const py::handle& object, std::string where) : where_(std::move(where)) {
    if (!py::isinstance<py::dict>(object)) throw py::type_error(where_ + ": a dict, not " + py::repr(object).cast<std::string>());
    dict_ = py::reinterpret_borrow<py::dict>(object);
  }
  const std::string& where() const { return where_; }

  py::object get(const char* key) {
    read_.insert(key);
    return dict_.contains(key) ? py::reinterpret_borrow<py::object>(dict_[key]) : py::none();
  }
  template <typename T>
  T number(const char* key, T fallback) {
    py::object value = get(key);
    if (value.is_none()) return fallback;
    if (py::isinstance<py::bool_>(value) && !std::is_same_v<T, bool>)
      throw py::type_error(where_ + ": " + key + " is a number, not a bool");
    try {
      return value.cast<T>();
    } catch (const py::cast_error&) {
      throw py::value_error(where_ + ": " + key + " " + py::repr(value).cast<std::string>() +
                            " is not a number it can be");
    }
  }
  void string(const char* key, char* out, size_t cap, bool required) {
    py::object value = get(key);
    if (value.is_none()) {
      if (required) throw py::value_error(where_ + ": " + key + " is missing");
      out[0] = '\0';
      return;
    }
    if (!py::isinstance<py::str>(value)) throw py::type_error(where_ + ": " + key + " is a str");
    copy_string(out, cap, value.cast<std::string>(), where_ + ": " + key);
  }
  uint32_t choice(const char* key, std::initializer_list<const char*> words) {
    py::object value = get(key);
    if (value.is_none()) return 0;
    std::string text = py::str(value).cast<std::string>();
    uint32_t i = 0;
    for (const char* w : words) {
      if (text == w) return i;
      ++i;
    }
    std::string all;
    for (const char* w : words) all += (all.empty() ? "" : ", ") + std::string(w);
    throw py::value_error(where_ + ": " + key + " '" + text + "' is none of " + all);
  }
  py::list list(const char* key, size_t max) {
    py::object value = get(key);
    if (value.is_none()) return py::list();
    if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value))
      throw py::type_error(where_ + ": " + key + " is a list");
    py::list items(value);
    if (items.size() > max)
      throw py::value_error(where_ + ": " + std::to_string(items.size()) + " " + key + ", at most " +
                            std::to_string(max));
    return items;
  }
  // Every key was one it has.
  void done() const {
    for (auto item : dict_) {
      std::string key = py::str(item.first).cast<std::string>();
      if (!read_.count(key)) throw py::value_error(where_ + ": no such key '" + key + "'");
    }
  }

 private:
  py::dict dict_;
  std::string where_;
  std::set<std::string> read_;
};

rtaccel_callback_desc callback_of(const py::handle& object, const std::string& where) {
  rtaccel_callback_desc cb{};
  Fields f(object, where);
  f.string("name", cb.name, sizeof cb.name, true);
  f.string("executor", cb.executor, sizeof cb.executor, true);
  cb.executor_core = f.number<int32_t>("executor_core", 0);
  cb.executor_priority = f.number<int32_t>("executor_priority", 1);
  cb.cpu_ns = f.number<uint64_t>("cpu_ns", 0);
  cb.wait = f.choice("wait", {"suspend", "spin"});
  py::list segments = f.list("segments", RTACCEL_MAX_SEGMENTS);
  cb.nsegments = static_cast<uint32_t>(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    Fields s(segments[i], where + ": segment " + std::to_string(i));
    rtaccel_segment_desc& seg = cb.segments[i];
    s.string("service", seg.service, sizeof seg.service, true);
    s.string("accelerator", seg.accelerator, sizeof seg.accelerator, false);
    seg.wcet_ns = s.number<uint64_t>("wcet_ns", 0);
    s.done();
  }
  f.string("publishes", cb.publishes, sizeof cb.publishes, false);
  py::list triggers = f.list("triggers", RTACCEL_MAX_TRIGGERS);
  cb.ntriggers = static_cast<uint32_t>(triggers.size());
  for (size_t i = 0; i < triggers.size(); ++i) {
    if (!py::isinstance<py::str>(triggers[i])) throw py::type_error(where + ": triggers are topic names");
    copy_string(cb.triggers[i], sizeof cb.triggers[i], triggers[i].cast<std::string>(), where + ": trigger");
  }
  f.done();
  return cb;
}

rtaccel_chain_desc chain_of(const py::handle& object) {
  rtaccel_chain_desc chain{};
  std::string where = "chain";
  if (py::isinstance<py::dict>(object) && object.cast<py::dict>().contains("name"))
    where = "chain " + py::repr(object.cast<py::dict>()["name"]).cast<std::string>();
  Fields f(object, where);
  f.string("name", chain.name, sizeof chain.name, true);
  chain.priority = f.number<int32_t>("priority", 0);
  chain.critical = f.number<bool>("critical", true) ? 1 : 0;
  chain.period_ns = f.number<uint64_t>("period_ns", 0);
  chain.deadline_ns = f.number<uint64_t>("deadline_ns", chain.period_ns);
  chain.release = f.choice("release", {"unaligned", "together"});
  py::list callbacks = f.list("callbacks", RTACCEL_MAX_CALLBACKS);
  if (callbacks.empty()) throw py::value_error(where + ": no callbacks");
  chain.ncallbacks = static_cast<uint32_t>(callbacks.size());
  for (size_t i = 0; i < callbacks.size(); ++i)
    chain.callbacks[i] = callback_of(callbacks[i], where + ": callback " + std::to_string(i));
  f.done();
  if (chain.period_ns == 0) throw py::value_error(where + ": period_ns is missing");
  return chain;
}

// services: {name: (request_max, response_max)}
void services_of(const py::dict& services, rtaccel_registration_desc* desc) {
  if (services.empty()) throw py::value_error("a registration needs one service at least");
  if (services.size() > RTACCEL_MAX_SERVICES)
    throw py::value_error(std::to_string(services.size()) + " services, at most " +
                          std::to_string(RTACCEL_MAX_SERVICES));
  for (auto item : services) {
    rtaccel_service_need& need = desc->services[desc->nservices++];
    std::string name = py::str(item.first).cast<std::string>();
    copy_string(need.name, sizeof need.name, name, "service");
    auto sizes = item.second.cast<std::pair<uint64_t, uint64_t>>();
    if (sizes.first > RTACCEL_MAX_BUFFER || sizes.second > RTACCEL_MAX_BUFFER)
      throw py::value_error("service '" + name + "': buffers are at most " +
                            std::to_string(RTACCEL_MAX_BUFFER) + " bytes");
    need.request_max = static_cast<uint32_t>(sizes.first);
    need.response_max = static_cast<uint32_t>(sizes.second);
  }
}

rtaccel_registration_desc registration_of(const py::handle& chain, const py::object& callback,
                                          const py::dict& services) {
  rtaccel_registration_desc desc{};
  desc.chain = chain_of(chain);
  if (py::isinstance<py::str>(callback)) {
    std::string name = callback.cast<std::string>();
    uint32_t i = 0;
    while (i < desc.chain.ncallbacks && name != desc.chain.callbacks[i].name) ++i;
    if (i == desc.chain.ncallbacks)
      throw py::value_error("chain '" + std::string(desc.chain.name) + "' has no callback '" + name + "'");
    desc.callback = i;
  } else {
    int64_t i = callback.cast<int64_t>();
    if (i < 0 || i >= desc.chain.ncallbacks)
      throw py::value_error("chain '" + std::string(desc.chain.name) + "' has no callback " + std::to_string(i));
    desc.callback = static_cast<uint32_t>(i);
  }
  services_of(services, &desc);
  return desc;
}

struct Client;

// One registration, shared by its Python object and its buffers.
struct Registration {
  std::shared_ptr<Client> client;
  rtaccel_registration* reg = nullptr;
  std::string name;    // "chain 'c', callback 'cb'"
  int buffers = 0;     // Buffer objects alive
  int waiting = 0;     // threads in a request on it, the interpreter lock let go

  rtaccel_registration* live(const char* what) const {
    if (!reg) throw py::value_error(std::string(what) + ": the registration of " + name + " has ended");
    return reg;
  }
  int service(const py::object& which) const {
    if (py::isinstance<py::str>(which)) {
      int i = rtaccel_service_index(live("service"), which.cast<std::string>().c_str());
      if (i < 0) throw py::value_error(name + " registered no service '" + which.cast<std::string>() + "'");
      return i;
    }
    return which.cast<int>();
  }
  void end();
  ~Registration() { rtaccel_client_unregister(reg); }
};

struct Client {
  rtaccel_client* client = nullptr;
  std::string socket;
  std::vector<std::weak_ptr<Registration>> registrations;
  int in_call = 0;  // threads in a declaration or registration, the interpreter lock let go

  rtaccel_client* live(const char* what) const {
    if (!client) throw py::value_error(std::string(what) + ": the client of " + socket + " is closed");
    return client;
  }
  ~Client() { rtaccel_client_close(client); }
};

void Registration::end() {
  if (!reg) return;
  if (buffers)
    throw py::buffer_error("the registration of " + name + " has " + std::to_string(buffers) +
                           " buffers alive: delete them (and the arrays made from them) first");
  if (waiting) throw py::value_error("the registration of " + name + " has a request waiting in another thread");
  rtaccel_client_unregister(reg);
  reg = nullptr;
}

// A request or response buffer, exported with the buffer protocol.
struct Buffer {
  std::shared_ptr<Registration> owner;
  void* data;
  size_t size;
  Buffer(std::shared_ptr<Registration> r, void* d, size_t n) : owner(std::move(r)), data(d), size(n) {
    ++owner->buffers;
  }
  Buffer(const Buffer&) = delete;
  ~Buffer() { --owner->buffers; }
};

using RegistrationRef = std::shared_ptr<Registration>;

RegistrationRef make_registration(const std::shared_ptr<Client>& c, rtaccel_registration* reg,
                                  const rtaccel_registration_desc& desc) {
  auto r = std::make_shared<Registration>();
  r->client = c;
  r->reg = reg;
  r->name = "chain '" + std::string(desc.chain.name) + "', callback '" +
            desc.chain.callbacks[desc.callback].name + "'";
  c->registrations.push_back(r);
  return r;
}

// A registration is used by one thread at a time (rtaccel/accel.h): a
// second one, while the first waits with the interpreter lock let go, is
// refused rather than let race on the ring.
rtaccel_registration* alone(const Registration& r, const char* what) {
  rtaccel_registration* reg = r.live(what);
  if (r.waiting)
    throw py::value_error(std::string(what) + ": the registration of " + r.name +
                          " is waiting on a request in another thread; a registration is used by one "
                          "thread at a time");
  return reg;
}

// A request's wait with the interpreter lock let go; the registration stays.
template <typename F>
int without_the_lock(Registration& r, F call) {
  ++r.waiting;
  int err;
  {
    py::gil_scoped_release unlocked;
    err = call();
  }
  --r.waiting;
  return err;
}

// A round trip to the server with the interpreter lock let go; the
// connection stays open meanwhile (close() refuses).
template <typename F>
int on_the_connection(Client& c, const char* what, F call) {
  rtaccel_client* client = c.live(what);
  ++c.in_call;
  int err;
  {
    py::gil_scoped_release unlocked;
    err = call(client);
  }
  --c.in_call;
  return err;
}

// One of a registration's buffers (rtaccel_request_buffer or
// rtaccel_response_buffer) as a Buffer that keeps the registration.
std::unique_ptr<Buffer> buffer_of(const RegistrationRef& r, const py::object& service, const char* what,
                                  void* (*find)(rtaccel_registration*, int, size_t*)) {
  size_t cap = 0;
  void* data = find(r->live(what), r->service(service), &cap);
  if (!data) throw py::value_error(r->name + " has no such service");
  return std::make_unique<Buffer>(r, data, cap);
}

py::tuple ticket_tuple(const rtaccel_ticket& t) { return py::make_tuple(t.entry, t.state); }
rtaccel_ticket ticket_of(const py::tuple& t) {
  if (t.size() != 2) throw py::value_error("a ticket is what submit() returned");
  return rtaccel_ticket{t[0].cast<uint32_t>(), t[1].cast<uint32_t>()};
}

uint64_t timeout_ns_of(const py::object& timeout_s) {
  if (timeout_s.is_none()) return 0;
  double s = timeout_s.cast<double>();
  if (!(s > 0) || !std::isfinite(s) || s > 1e9)
    throw py::value_error("timeout_s must be a positive number of seconds (None: no limit)");
  return static_cast<uint64_t>(s * 1e9) ? static_cast<uint64_t>(s * 1e9) : 1;
}

void bind_registration(py::module_& m) {
  py::class_<Buffer>(m, "AccelBuffer", py::buffer_protocol(),
                     "A request or response buffer in a registration's shared region (bytes).")
      .def_buffer([](Buffer& b) {
        b.owner->live("buffer");
        return py::buffer_info(b.data, 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size)}, {1}, false);
      })
      .def("__len__", [](const Buffer& b) { return b.size; });

  py::class_<Registration, RegistrationRef>(m, "AccelRegistration",
                                            "One callback registered with rtaccel-server.")
      .def_readonly("name", &Registration::name)
      .def_property_readonly("info",
                             [](const Registration& r) {
                               rtaccel_registration_info info{};
                               rtaccel_registration_query(r.live("info"), &info);
                               py::dict d;
                               d["callback_id"] = info.callback_id;
                               d["device"] = info.device;
                               d["bucket"] = info.bucket;
                               d["priority"] = info.priority;
                               d["wait"] = info.wait == RTACCEL_WAIT_SPIN ? "spin" : "suspend";
                               return d;
                             })
      .def_property_readonly("active", [](const Registration& r) { return r.reg != nullptr; })
      .def("service_index", &Registration::service, py::arg("service"))
      .def(
          "request_buffer",
          [](const RegistrationRef& r, const py::object& service) {
            return buffer_of(r, service, "request_buffer", rtaccel_request_buffer);
          },
          py::arg("service"), "The service's request buffer, written in place (numpy.frombuffer).")
      .def(
          "response_buffer",
          [](const RegistrationRef& r, const py::object& service) {
            return buffer_of(r, service, "response_buffer", rtaccel_response_buffer);
          },
          py::arg("service"), "The service's response buffer, read in place.")
      .def(
          "submit",
          [](Registration& r, const py::object& service, size_t length) {
            rtaccel_ticket t{};
            int err = rtaccel_submit(alone(r, "submit"), r.service(service), length, &t);
            if (err < 0) raise_errno(err, "submit to " + r.name);
            return ticket_tuple(t);
          },
          py::arg("service"), py::arg("length"),
          "Submits LENGTH bytes of the request buffer; returns the ticket. BlockingIOError "
          "(EBUSY): the ring is full.")
      .def(
          "wait",
          [](Registration& r, const py::tuple& ticket, const py::object& timeout_s) {
            rtaccel_registration* reg = alone(r, "wait");
            rtaccel_ticket t = ticket_of(ticket);
            uint64_t timeout = timeout_ns_of(timeout_s);
            size_t length = 0;
            int err = without_the_lock(r, [&] { return rtaccel_wait(reg, &t, timeout, &length); });
            if (err < 0) raise_errno(err, "request of " + r.name);
            return length;
          },
          py::arg("ticket"), py::arg("timeout_s") = py::none(),
          "Waits for a submitted request; returns the bytes of its response. TimeoutError: "
          "it still runs (wait again); OSError: the service's or the server's error.")
      .def(
          "poll",
          [](Registration& r, const py::tuple& ticket) -> py::object {
            rtaccel_ticket t = ticket_of(ticket);
            size_t length = 0;
            int err = rtaccel_poll(alone(r, "poll"), &t, &length);
            if (err == -EAGAIN) return py::none();
            if (err < 0) raise_errno(err, "request of " + r.name);
            return py::int_(length);
          },
          py::arg("ticket"), "None while the request runs, else as wait().")
      .def(
          "call",
          [](Registration& r, const py::object& service, size_t length, const py::object& timeout_s) {
            rtaccel_registration* reg = alone(r, "call");
            int index = r.service(service);
            uint64_t timeout = timeout_ns_of(timeout_s);
            size_t out = 0;
            int err = without_the_lock(r, [&] { return rtaccel_call(reg, index, length, timeout, &out); });
            if (err < 0) raise_errno(err, "request of " + r.name);
            return out;
          },
          py::arg("service"), py::arg("length"), py::arg("timeout_s") = py::none(),
          "submit() then wait(): the bytes of the response.")
      .def(
          "timestamps",
          [](const Registration& r, const py::tuple& ticket) {
            rtaccel_ticket t = ticket_of(ticket);
            rtaccel_request_times times{};
            int err = rtaccel_request_timestamps(alone(r, "timestamps"), &t, &times);
            if (err < 0) raise_errno(err, "timestamps of " + r.name);
            py::dict d;
            d["submit_ns"] = times.submit_ns;
            d["start_ns"] = times.start_ns;
            d["end_ns"] = times.end_ns;
            return d;
          },
          py::arg("ticket"), "CLOCK_MONOTONIC times of the ticket's last request: submitted, started, ended.")
      .def("close", &Registration::end, "Ends the registration (BufferError while a buffer of it is alive).")
      .def("__enter__", [](const RegistrationRef& r) { return r; })
      .def("__exit__", [](Registration& r, py::args) { r.end(); });
}

void bind_client(py::module_& m) {
  py::class_<Client, std::shared_ptr<Client>>(m, "AccelClient",
                                              "A connection to rtaccel-server (rtaccel/accel.h).")
      .def(py::init([](const std::optional<std::string>& socket_path) {
             auto c = std::make_shared<Client>();
             const char* env = std::getenv(RTACCEL_SOCKET_ENV);
             c->socket = socket_path ? *socket_path : env ? env : RTACCEL_SOCKET_DEFAULT;
             int err;
             {
               py::gil_scoped_release unlocked;
               err = rtaccel_client_connect(c->socket.c_str(), &c->client);
             }
             if (err < 0) raise_errno(err, "rtaccel-server at " + c->socket);
             return c;
           }),
           py::arg("socket_path") = py::none(),
           "Connects to the server at SOCKET_PATH (None: $RTACCEL_SOCKET, else /run/rtaccel/server.sock).")
      .def_readonly("socket_path", &Client::socket)
      .def(
          "declare",
          [](Client& c, const py::list& chains) {
            std::vector<rtaccel_chain_desc> descs;
            for (auto chain : chains) descs.push_back(chain_of(chain));
            char why[512] = "";
            int err = on_the_connection(c, "declare", [&](rtaccel_client* client) {
              return rtaccel_client_declare(client, descs.data(), descs.size(), why, sizeof why);
            });
            if (err < 0)
              raise_errno(err, descs.size() == 1 ? "declaring chain '" + std::string(descs[0].name) + "'"
                                                 : "declaring " + std::to_string(descs.size()) + " chains",
                          why);
          },
          py::arg("chains"),
          "Declares CHAINS (dicts) to admission, all or none. PermissionError (EPERM) or "
          "OSError EDEADLK: refused, with the server's reason.")
      .def(
          "register",
          [](const std::shared_ptr<Client>& c, const py::dict& chain, const py::object& callback,
             const py::dict& services) {
            rtaccel_registration_desc desc = registration_of(chain, callback, services);
            rtaccel_registration* reg = nullptr;
            char why[512] = "";
            int err = on_the_connection(*c, "register", [&](rtaccel_client* client) {
              return rtaccel_client_register(client, &desc, &reg, why, sizeof why);
            });
            if (err < 0)
              raise_errno(err, "registering callback '" + std::string(desc.chain.callbacks[desc.callback].name) +
                                   "' of chain '" + desc.chain.name + "'", why);
            return make_registration(c, reg, desc);
          },
          py::arg("chain"), py::arg("callback"), py::arg("services"),
          "Registers CALLBACK (its name or index) of CHAIN with SERVICES ({name: (request_max, "
          "response_max)}); returns its AccelRegistration.")
      .def(
          "register_all",
          [](const std::shared_ptr<Client>& c, const py::list& items) {
            std::vector<rtaccel_registration_desc> descs;
            for (auto item : items) {
              auto t = item.cast<py::tuple>();
              if (t.size() != 3) throw py::value_error("register_all takes (chain, callback, services) tuples");
              descs.push_back(registration_of(t[0], t[1], t[2].cast<py::dict>()));
            }
            std::vector<rtaccel_registration*> regs(descs.size(), nullptr);
            char why[512] = "";
            int err = on_the_connection(*c, "register_all", [&](rtaccel_client* client) {
              return rtaccel_client_register_all(client, descs.data(), descs.size(), regs.data(), why, sizeof why);
            });
            if (err < 0) {
              for (rtaccel_registration* reg : regs) rtaccel_client_unregister(reg);
              raise_errno(err, "registering " + std::to_string(descs.size()) + " callbacks", why);
            }
            py::list out;
            for (size_t i = 0; i < descs.size(); ++i) out.append(make_registration(c, regs[i], descs[i]));
            return out;
          },
          py::arg("items"),
          "Registers several (chain, callback, services) in decreasing accelerator utilisation; all or "
          "none: a refusal ends those made before it.")
      .def(
          "close",
          [](Client& c) {
            if (c.in_call)
              throw py::value_error("close: the client of " + c.socket +
                                    " has a declaration or registration under way in another thread");
            std::vector<RegistrationRef> live;
            for (auto& weak : c.registrations)
              if (auto r = weak.lock(); r && r->reg) live.push_back(r);
            // all or nothing: a registration that cannot end yet keeps them all
            for (auto& r : live)
              if (r->buffers || r->waiting) r->end();
            for (auto& r : live) r->end();
            rtaccel_client_close(c.client);
            c.client = nullptr;
            c.registrations.clear();
          },
          "Ends every registration of the client, then the connection.")
      .def("__enter__", [](const std::shared_ptr<Client>& c) { return c; })
      .def("__exit__", [](const py::object& self, py::args) { self.attr("close")(); });
}

}  // namespace

void bind_accel_client(py::module_& m) {
  bind_registration(m);
  bind_client(m);
}
