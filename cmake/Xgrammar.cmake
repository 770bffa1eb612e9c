# xgrammar's C++ core: JSON-schema, regex and EBNF grammars compiled into
# token masks. Built as a static library from the sources that
# scripts/fetch-xgrammar unpacks (and scripts/setup runs) into .deps/, with
# its Python bindings left out. Without them the build goes on and the
# server refuses structured-output requests, saying how to get it.
set(EXACTLY_XGRAMMAR_DIR "${CMAKE_SOURCE_DIR}/.deps/xgrammar-0.2.9" CACHE PATH "xgrammar's unpacked sources")
# Off for builds that never compile a grammar (the fuzz build: its request
# path has no grammar engine), which then skip compiling xgrammar.
option(EXACTLY_XGRAMMAR "Build structured output with xgrammar when its sources are in .deps/" ON)
set(EXACTLY_HAVE_XGRAMMAR OFF)
# scripts/setup reads this to configure again once the sources have come.
set(EXACTLY_XGRAMMAR_BUILT OFF CACHE INTERNAL "")
if(NOT EXACTLY_XGRAMMAR)
  message(STATUS "exactly: structured output left out (EXACTLY_XGRAMMAR=OFF)")
elseif(EXISTS "${EXACTLY_XGRAMMAR_DIR}/.exactly-ready")
  set(EXACTLY_HAVE_XGRAMMAR ON)
  set(EXACTLY_XGRAMMAR_BUILT ON CACHE INTERNAL "")
  # Every source but the Python bindings' (cpp/tvm_ffi/), as its own CMakeLists takes them.
  file(GLOB_RECURSE EXACTLY_XGRAMMAR_SOURCES CONFIGURE_DEPENDS "${EXACTLY_XGRAMMAR_DIR}/cpp/*.cc")
  list(FILTER EXACTLY_XGRAMMAR_SOURCES EXCLUDE REGEX "/cpp/tvm_ffi/")
  # With our logging hooks (src/constrain/xgrammar_log.cc), which turn its
  # warnings into refusals.
  add_library(exactly_xgrammar STATIC ${EXACTLY_XGRAMMAR_SOURCES} "${CMAKE_SOURCE_DIR}/src/constrain/xgrammar_log.cc")
  target_compile_definitions(exactly_xgrammar PRIVATE XGRAMMAR_LOG_CUSTOMIZE=1)
  target_include_directories(exactly_xgrammar PRIVATE "${EXACTLY_XGRAMMAR_DIR}/cpp" "${CMAKE_SOURCE_DIR}/src")
  # Its own language level and no project warnings: third-party code.
  set_target_properties(exactly_xgrammar PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                                                    POSITION_INDEPENDENT_CODE ON)
  target_compile_options(exactly_xgrammar PRIVATE -w $<$<NOT:$<CONFIG:Debug>>:-O2>)
  target_include_directories(exactly_xgrammar PUBLIC "${EXACTLY_XGRAMMAR_DIR}/include")
  target_include_directories(exactly_xgrammar SYSTEM PUBLIC "${EXACTLY_XGRAMMAR_DIR}/3rdparty/picojson"
                                                            "${EXACTLY_XGRAMMAR_DIR}/3rdparty/dlpack/include")
  target_compile_definitions(exactly_xgrammar PUBLIC XGRAMMAR_ENABLE_CPPTRACE=0 XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
  find_package(Threads REQUIRED)
  target_link_libraries(exactly_xgrammar PUBLIC Threads::Threads)
  message(STATUS "exactly: structured output with xgrammar from ${EXACTLY_XGRAMMAR_DIR}")
else()
  message(WARNING "exactly: no xgrammar sources in ${EXACTLY_XGRAMMAR_DIR}: structured output is left out "
                  "(run scripts/fetch-xgrammar, then configure again)")
endif()
