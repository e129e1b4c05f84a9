// A run's options (internal): one table, from which rtaccel-exec's parser and
// usage text are made, and which the Python package reads (rtaccel._core's
// run_options) to make `rtaccel run`'s parser and the command line it hands
// to rtaccel-exec. Adding an option is a row here (and the RunOptions field
// it sets); tests/python/test_run_options.py holds the three to it.
//
// How to add an option: a row in kOptions (run_options.cc) with its name,
// the value it takes (nullptr for a flag) and its default, whether it may
// be repeated, who
// gives it (the user, or rtaccel itself: the calibration's floors, the
// binaries' paths), its help, and the function that parses the value into
// RunOptions, returning false for a value it does not take.
#ifndef RTACCEL_EXEC_RUN_OPTIONS_H_
#define RTACCEL_EXEC_RUN_OPTIONS_H_

#include <span>
#include <string>
#include <string_view>

#include "rtaccel/exec.hpp"

namespace rtaccel::exec {

struct RunOptionSpec {
  const char* name;   // --NAME
  char short_name;    // -C; 0: none
  const char* value;  // what it takes, as the usage names it ("S", "DIR"); nullptr: a flag
  const char* given;  // its value where not given (RunOptions' own, as text); nullptr: none
  const char* alone;  // what `rtaccel run --NAME` means without a value; nullptr: it needs one
  bool repeated;      // given again, it adds another
  bool for_users;     // false: what rtaccel gives rtaccel-exec (`rtaccel run` does not offer it)
  const char* help;   // its usage text, lines joined by '\n'
  const char* takes;  // what a bad value is told it must be ("seconds", "0.01..1")
  // Sets VALUE (nullptr for a flag) into O; false: not a value it takes.
  bool (*set)(RunOptions* o, const char* value);
};

// Every option, in the order the usage lists them.
std::span<const RunOptionSpec> run_option_specs();
// The option --NAME; null: none.
const RunOptionSpec* find_run_option(std::string_view name);
// rtaccel-exec's usage text, made from the table.
std::string run_usage();

}  // namespace rtaccel::exec

#endif  // RTACCEL_EXEC_RUN_OPTIONS_H_
