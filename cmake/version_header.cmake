# Writes OUTPUT with the pelab version and git commit; leaves it untouched when unchanged,
# so an unchanged tree does not recompile anything. PELAB_KEEP_VERSION_HEADER=1 in the
# environment leaves an existing OUTPUT alone (tests/pip_install.sh: its build must not relink
# the pelab that the suite's other tests are running because the tree was edited since).
if(EXISTS "${OUTPUT}" AND "$ENV{PELAB_KEEP_VERSION_HEADER}" STREQUAL "1")
  return()
endif()
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(content "#pragma once\n#define PELAB_VERSION \"${PELAB_VERSION}\"\n#define PELAB_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE "${OUTPUT}" "${content}")
endif()
