# ROS 2's C libraries as the PyPI wheels lay them out (ros-kilted-rcl and
# the packages it brings): headers under PREFIX/include/<package>/, shared
# libraries in PREFIX/lib/, and each wheel's bundled third-party libraries
# (hashed names) in PREFIX/lib/pythonX.Y/site-packages/ros_<package>.libs/.
# PREFIX is the virtualenv they were installed in: RTACCEL_ROS2_PREFIX, else
# the one of the Python the build uses (make: the checkout's .venv).
#
# rtaccel_ros2 (an INTERFACE target) is what a program on rcl links:
# - every ros_*.libs folder and PREFIX/lib on the runtime path, as old-style
#   RPATH (--disable-new-dtags): the wheels' libraries find their bundled
#   dependencies through the program's RPATH, which RUNPATH would not give
#   them;
# - the Python library, always (--no-as-needed): librcl needs message
#   packages' *__rosidl_generator_py.so, which need Python's symbols.
# Sets RTACCEL_ROS2_FOUND.

set(RTACCEL_ROS2_FOUND OFF)
if(NOT RTACCEL_ROS2_PREFIX AND Python_EXECUTABLE)
  get_filename_component(_ros2_bin ${Python_EXECUTABLE} DIRECTORY)
  get_filename_component(RTACCEL_ROS2_PREFIX ${_ros2_bin} DIRECTORY)
endif()
if(RTACCEL_ROS2_PREFIX AND EXISTS ${RTACCEL_ROS2_PREFIX}/include/rcl/rcl/rcl.h
   AND EXISTS ${RTACCEL_ROS2_PREFIX}/lib/librcl.so)
  # Development.Module too: pybind11 finds Python again and needs it
  find_package(Python COMPONENTS Interpreter Development.Module Development.Embed)
  if(Python_Development.Embed_FOUND)
    set(RTACCEL_ROS2_FOUND ON)
  else()
    message(STATUS "ROS 2 in ${RTACCEL_ROS2_PREFIX}, but no Python library to link (Debian: libpython3-dev)")
  endif()
endif()

if(RTACCEL_ROS2_FOUND)
  file(GLOB _ros2_includes LIST_DIRECTORIES true ${RTACCEL_ROS2_PREFIX}/include/*)
  list(FILTER _ros2_includes EXCLUDE REGEX "/python[0-9.]+$")
  file(GLOB _ros2_libs LIST_DIRECTORIES true ${RTACCEL_ROS2_PREFIX}/lib/python*/site-packages/ros_*.libs)
  set(RTACCEL_ROS2_RPATH ${RTACCEL_ROS2_PREFIX}/lib ${_ros2_libs})
  list(JOIN RTACCEL_ROS2_RPATH ":" _ros2_rpath)
  # What an installation's rtaccel-ros.pc and rtaccel::ros give a program:
  # the same, as flags and absolute paths.
  set(RTACCEL_ROS2_LIBS)
  foreach(lib rcl rmw rcutils rosidl_runtime_c)
    list(APPEND RTACCEL_ROS2_LIBS ${RTACCEL_ROS2_PREFIX}/lib/lib${lib}.so)
  endforeach()
  list(TRANSFORM _ros2_includes PREPEND "-I" OUTPUT_VARIABLE _ros2_cflags)
  list(JOIN _ros2_cflags " " RTACCEL_ROS2_CFLAGS)
  set(RTACCEL_ROS2_INCLUDE_DIRS ${_ros2_includes})
  set(RTACCEL_ROS2_RPATH_STRING ${_ros2_rpath})
  set(RTACCEL_ROS2_PYTHON_LIBRARY ${Python_LIBRARIES})
  add_library(rtaccel_ros2 INTERFACE)
  target_include_directories(rtaccel_ros2 SYSTEM INTERFACE ${_ros2_includes})
  target_link_directories(rtaccel_ros2 INTERFACE ${RTACCEL_ROS2_PREFIX}/lib)
  target_link_libraries(rtaccel_ros2 INTERFACE rcl rmw rcutils rosidl_runtime_c
    "-Wl,--push-state,--no-as-needed" Python::Python "-Wl,--pop-state")
  target_link_options(rtaccel_ros2 INTERFACE "LINKER:--disable-new-dtags" "LINKER:-rpath,${_ros2_rpath}"
    # the wheels' libraries name their bundled ones, found at run time
    # through the RPATH above
    "LINKER:-rpath-link,${_ros2_rpath}")
  message(STATUS "ROS 2 (rcl) found in ${RTACCEL_ROS2_PREFIX}: building the ros layer")
else()
  message(STATUS "ROS 2's rcl not found (pip install ros-kilted-rcl ros-kilted-rmw-fastrtps-cpp into the "
                 "build's Python environment, or set RTACCEL_ROS2_PREFIX): no ros layer")
endif()
