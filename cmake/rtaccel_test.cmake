# How rtaccel's tests are registered with ctest: every one runs under
# rtaccel-test-guard (tests/harness/test_guard.c), which ends whatever the
# test leaves running and reports a hang at the test's own timeout, so that a
# failing test fails at once and leaves nothing behind.
#
# Labels say what a test is, for `ctest -L` (make check, make test):
#   unit         one component inside one process
#   integration  several processes, daemons, the interposer, an installation
#   slow         over about ten seconds: make test runs it, make check does not
#   root         exercises what needs root (SCHED_FIFO, namespaces, cgroups,
#                another uid); without it the test skips that part, saying so
#   asan         added to every test of a sanitizer build

# rtaccel_add_test(NAME COMMAND PROGRAM [ARG...] LABELS LABEL... [TIMEOUT S]
#                  [SERIAL] [RESOURCES] [ENVIRONMENT VAR=VALUE...])
# PROGRAM may name a target. TIMEOUT (120 s) is the guard's; ctest's is 30 s
# later, a backstop. SERIAL: the test runs alone (it compares timings, or it
# makes named objects that a neighbour would be blamed for). RESOURCES (needs
# SERIAL): the guard also checks that the test leaves no shared memory,
# socket file, network namespace, interface or cgroup behind. Exit 77 is a
# skip.
function(rtaccel_add_test name)
  cmake_parse_arguments(T "SERIAL;RESOURCES" "TIMEOUT" "COMMAND;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT T_COMMAND OR NOT T_LABELS)
    message(FATAL_ERROR "rtaccel_add_test(${name}): COMMAND and LABELS are required")
  endif()
  if(T_RESOURCES AND NOT T_SERIAL)
    message(FATAL_ERROR "rtaccel_add_test(${name}): RESOURCES needs SERIAL")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  list(POP_FRONT T_COMMAND program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  set(guard_args --timeout ${T_TIMEOUT})
  if(T_RESOURCES)
    list(APPEND guard_args --resources)
  endif()
  add_test(NAME ${name} COMMAND rtaccel-test-guard ${guard_args} ${program} ${T_COMMAND})
  rtaccel_test_properties(${name} ${T_TIMEOUT} "${T_LABELS}")
  if(T_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL ON)
  endif()
  if(T_ENVIRONMENT)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENVIRONMENT}")
  endif()
endfunction()

# What every test shares: the backstop timeout, the labels, exit 77 as a
# skip, and the leftovers fixture (the suite's last test checks that the
# whole run left nothing behind).
function(rtaccel_test_properties name timeout labels)
  math(EXPR backstop "${timeout} + 30")
  if(RTACCEL_SANITIZE)
    list(APPEND labels asan)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${backstop} LABELS "${labels}"
                       SKIP_RETURN_CODE 77 FIXTURES_REQUIRED leftovers)
endfunction()

# rtaccel_discover_gtests(TARGET LABELS LABEL... [TIMEOUT S] [SERIAL]): each
# GoogleTest case of TARGET as a test of its own, under the guard.
function(rtaccel_discover_gtests target)
  cmake_parse_arguments(T "SERIAL" "TIMEOUT" "LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  math(EXPR backstop "${T_TIMEOUT} + 30")
  set(labels ${T_LABELS})
  if(RTACCEL_SANITIZE)
    list(APPEND labels asan)
  endif()
  set_property(TARGET ${target} PROPERTY CROSSCOMPILING_EMULATOR
               $<TARGET_FILE:rtaccel-test-guard> --timeout ${T_TIMEOUT})
  set(serial OFF)
  if(T_SERIAL)
    set(serial ON)
  endif()
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT ${backstop} RUN_SERIAL ${serial} SKIP_RETURN_CODE 77
                                  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
                                  FIXTURES_REQUIRED leftovers)
  # PROPERTIES flattens a list value, so the labels come from a file ctest
  # reads after the discovered tests (named in ${target}_TESTS).
  set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${labels_file}
       "if(${target}_TESTS)\n"
       "  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${labels}\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
endfunction()
