# How rtaccel's layers are built (see docs/architecture.md).
#
# src/LAYERS says which layer may use which and which layer each public
# header (include/rtaccel/) belongs to; tests/build/layers.py checks every
# #include against it. The compiler enforces what it can of the same list:
# no layer's sources see src/ or include/ whole. Each sees two folders of
# its own, made here: links to its own private headers and core's
# (private-headers/), and links to the public headers of itself and of the
# layers it uses (public-headers/). A layer's static library gives the
# targets that link it its own public headers only. Another layer's private
# header, or the public header of a layer it may not use, is "No such file"
# (tests/build/layering.sh).

set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/LAYERS)
file(STRINGS ${PROJECT_SOURCE_DIR}/src/LAYERS rtaccel_layers_lines)
set(RTACCEL_LAYERS)
set(rtaccel_layers_section)
foreach(line IN LISTS rtaccel_layers_lines)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(STRIP "${line}" line)
  if(line MATCHES "^\\[([a-z]+)\\]$")
    set(rtaccel_layers_section ${CMAKE_MATCH_1})
  elseif(line MATCHES "^([^:]+):(.*)$")
    string(STRIP "${CMAKE_MATCH_1}" name)
    separate_arguments(names UNIX_COMMAND "${CMAKE_MATCH_2}")
    if(rtaccel_layers_section STREQUAL "layers")
      list(APPEND RTACCEL_LAYERS ${name})
      set(RTACCEL_LAYER_USES_${name} ${names})
    elseif(rtaccel_layers_section STREQUAL "headers")
      list(APPEND RTACCEL_LAYER_HEADERS_${names} ${name})
    endif()
  endif()
endforeach()

# rtaccel_header_view(FOLDER HEADER...): FOLDER/rtaccel/ holding links to
# HEADERs (paths under include/), made anew at each configure so that a
# header the list no longer allows goes.
function(rtaccel_header_view folder)
  file(REMOVE_RECURSE ${folder})
  file(MAKE_DIRECTORY ${folder}/rtaccel)
  foreach(header IN LISTS ARGN)
    get_filename_component(file ${header} NAME)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${header} ${folder}/rtaccel/${file} SYMBOLIC)
  endforeach()
endfunction()

# rtaccel_private_headers(TARGET LAYER...): TARGET may include the private
# headers of these layers (a layer's tests and tools, the Python bindings).
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

# rtaccel_layer_headers(TARGET LAYER): TARGET's sources are LAYER's: they see
# LAYER's private headers and core's where LAYER uses core, and the public
# headers of LAYER and of the layers src/LAYERS lets it use.
function(rtaccel_layer_headers target layer)
  if(NOT layer IN_LIST RTACCEL_LAYERS)
    message(FATAL_ERROR "rtaccel_layer_headers(${target}): ${layer} is no layer of src/LAYERS")
  endif()
  set(private ${layer})
  if(core IN_LIST RTACCEL_LAYER_USES_${layer})
    list(APPEND private core)
  endif()
  rtaccel_private_headers(${target} ${private})
  set(headers ${RTACCEL_LAYER_HEADERS_${layer}})
  foreach(used IN LISTS RTACCEL_LAYER_USES_${layer})
    list(APPEND headers ${RTACCEL_LAYER_HEADERS_${used}})
  endforeach()
  rtaccel_header_view(${PROJECT_BINARY_DIR}/public-headers/${target} ${headers})
  target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/public-headers/${target})
endfunction()

# rtaccel_layer(NAME LAYER L SOURCES FILE... [PUBLIC LIB...] [PRIVATE LIB...]
#               [SHARED VERSION_SCRIPT [SHARED_TARGET T] [EXPORT_NAME N]])
# The objects of layer L's SOURCES, compiled once, make the static library
# NAME that rtaccel's programs and the Python module link and, with SHARED
# (and not in a wheel or a libFuzzer build), the shared library
# librtaccel_X.so.0 for programs, exporting only what VERSION_SCRIPT names.
# NAME gives the targets that link it L's public headers; the shared library
# gives include/ whole, as an installation does.
function(rtaccel_layer name)
  cmake_parse_arguments(L "" "LAYER;SHARED;SHARED_TARGET;EXPORT_NAME" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  add_library(${name}_objs OBJECT ${L_SOURCES})
  target_compile_options(${name}_objs PRIVATE ${RTACCEL_WARNINGS})
  target_compile_definitions(${name}_objs PRIVATE _GNU_SOURCE)
  rtaccel_layer_headers(${name}_objs ${L_LAYER})
  target_link_libraries(${name}_objs PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})

  set(own ${PROJECT_BINARY_DIR}/public-headers/layer-${L_LAYER})
  rtaccel_header_view(${own} ${RTACCEL_LAYER_HEADERS_${L_LAYER}})
  add_library(${name} STATIC $<TARGET_OBJECTS:${name}_objs>)
  target_include_directories(${name} PUBLIC ${own})
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
