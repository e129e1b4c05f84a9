# How rtaccel's layers are built (see docs/architecture.md).
#
# A layer's private headers (src/LAYER/*.h) are its own. No target sees
# src/ whole: each sees a folder of its own, made here, holding links to the
# layers it may reach into (its own and core, or for a layer's tests and
# tools that layer's). Another layer's private header is "No such file", so
# a layer that reaches across fails to build (tests/build/layering.sh).

# rtaccel_private_headers(TARGET LAYER...)
function(rtaccel_private_headers target)
  set(view ${PROJECT_BINARY_DIR}/private-headers/${target})
  file(MAKE_DIRECTORY ${view})
  foreach(layer IN LISTS ARGN)
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/src/${layer})
      message(FATAL_ERROR "rtaccel_private_headers(${target}): there is no layer src/${layer}")
    endif()
    if(NOT IS_SYMLINK ${view}/${layer})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${layer} ${view}/${layer} SYMBOLIC)
    endif()
  endforeach()
  target_include_directories(${target} PRIVATE ${view})
endfunction()

# rtaccel_layer(NAME SOURCES FILE... LAYERS LAYER... [PUBLIC LIB...]
#               [PRIVATE LIB...] [SHARED VERSION_SCRIPT [SHARED_TARGET T]
#               [EXPORT_NAME N]])
# The layer's objects, compiled once, make the static library NAME that
# rtaccel's programs and the Python module link and, with SHARED (and not in
# a wheel or a libFuzzer build), the shared library librtaccel_X.so.0 for
# programs, exporting only what VERSION_SCRIPT names. LAYERS: the private
# headers its sources may include.
function(rtaccel_layer name)
  cmake_parse_arguments(L "" "SHARED;SHARED_TARGET;EXPORT_NAME" "SOURCES;LAYERS;PUBLIC;PRIVATE" ${ARGN})
  add_library(${name}_objs OBJECT ${L_SOURCES})
  target_compile_options(${name}_objs PRIVATE ${RTACCEL_WARNINGS})
  target_compile_definitions(${name}_objs PRIVATE _GNU_SOURCE)
  target_include_directories(${name}_objs PUBLIC ${PROJECT_SOURCE_DIR}/include)
  rtaccel_private_headers(${name}_objs ${L_LAYERS})
  target_link_libraries(${name}_objs PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})

  add_library(${name} STATIC $<TARGET_OBJECTS:${name}_objs>)
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})

  if(L_SHARED AND NOT SKBUILD AND NOT RTACCEL_FUZZ)
    set(shared ${name}_shared)
    if(L_SHARED_TARGET)
      set(shared ${L_SHARED_TARGET})
    endif()
    add_library(${shared} SHARED $<TARGET_OBJECTS:${name}_objs>)
    target_include_directories(${shared} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${shared} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})
    target_link_options(${shared} PRIVATE -Wl,--version-script=${L_SHARED} -Wl,--no-undefined)
    set_target_properties(${shared} PROPERTIES OUTPUT_NAME ${name}
      VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR} LINK_DEPENDS ${L_SHARED})
    if(L_EXPORT_NAME)
      set_target_properties(${shared} PROPERTIES EXPORT_NAME ${L_EXPORT_NAME})
    endif()
  endif()
endfunction()
