# Read by ctest (through TEST_INCLUDE_FILES, after the tests that catch_discover_tests
# found in the same executable): gives the label "slow" to the test cases tagged [slow],
# so that `ctest -LE slow` runs the quick suite and `ctest` still runs everything.
#
# Why not catch_discover_tests twice, once with TEST_SPEC "[slow]" and PROPERTIES
# LABELS slow and once with "~[slow]": an executable without slow cases makes the
# "[slow]" discovery warn "contains no tests!" on every build. Asking the executable
# for its slow cases here keeps one discovery, and a tag added or removed takes effect
# at the next build without re-running CMake.
#
# In: CLUSTERSIM_TEST_EXECUTABLE, CLUSTERSIM_TEST_PREFIX (the discovery's TEST_PREFIX).
if(NOT EXISTS "${CLUSTERSIM_TEST_EXECUTABLE}")
  return()  # not built: catch_discover_tests has registered a NOT_BUILT test instead
endif()
execute_process(COMMAND "${CLUSTERSIM_TEST_EXECUTABLE}" "[slow]" --list-test-names-only
                OUTPUT_VARIABLE clustersim_slow_names)
string(REPLACE "\n" ";" clustersim_slow_names "${clustersim_slow_names}")
foreach(clustersim_name IN LISTS clustersim_slow_names)
  if(NOT clustersim_name STREQUAL "")
    set_tests_properties("${CLUSTERSIM_TEST_PREFIX}${clustersim_name}" PROPERTIES LABELS slow)
  endif()
endforeach()
