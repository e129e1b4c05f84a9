"""What the rtaccel command exits with, and the errors that choose it.

One meaning per status, in the command and in the programs it starts
(src/core/exit.h holds the same for them):

  0    success;
  1    the property the command checks does not hold: a critical chain is
       not schedulable (analyze), a paam run's bound was exceeded (run,
       compare, report, demo: runner.bounds_exceeded), real-time priorities
       are not allowed (realtime);
  2    bad input: an argument, a workload, a file the command reads;
  3    a runtime failure: a program or the machine failed (a server that did
       not start, a benchmark that crashed, a device that is missing, a
       full disk under the command's output);
  77   a benchmark cannot run on this machine, and said why;
  130  interrupted (Ctrl-C), with what was measured so far written.

A command under `rtaccel shim` or `rtaccel isolate run-be` exits with the
program's own status.
"""

EXIT_OK = 0
EXIT_FAILS = 1
EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 3
EXIT_CANNOT_RUN_HERE = 77
EXIT_INTERRUPTED = 130


class Error(Exception):
    """A failure the command reports in one line. A runtime failure unless
    raised with bad_input=True (a file or value the user gave is wrong)."""

    def __init__(self, *args, bad_input: bool = False):
        super().__init__(*args)
        self.exit_code = EXIT_BAD_INPUT if bad_input else EXIT_RUNTIME
