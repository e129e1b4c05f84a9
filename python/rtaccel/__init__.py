"""rtaccel: predictable accelerator-heavy real-time software on Linux.

The workload loader and the response-time analysis are C++ (``rtaccel._core``,
built by CMake); this package is the command line, formatting, experiments and
plots around them.
"""

try:
    from rtaccel import _core
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "rtaccel._core is not built; run 'make' in the rtaccel checkout first"
    ) from exc

from rtaccel._core import (  # noqa: F401  (re-exported API)
    WorkloadError,
    analyze,
    arrivals,
    bucket_of,
    load_workload,
    load_workload_string,
)

# The version of the C++ build this package runs on (CMakeLists.txt).
__version__ = _core.__version__
