// The Catch2 this machine has: 2.x (Debian 12: one header) or 3.x (Debian 13 on: split
// headers and a library), with every macro prefixed CATCH_ (LibTorch defines its own CHECK).
// Test files include this, not Catch2's headers.
#pragma once

#ifndef CATCH_CONFIG_PREFIX_ALL
#define CATCH_CONFIG_PREFIX_ALL
#endif
// PELAB_CATCH2_MAJOR: the version CMake found and links (tests/CMakeLists.txt), whose headers
// must be the ones included even where the other version's are on the include path too
#if defined(PELAB_CATCH2_MAJOR) ? PELAB_CATCH2_MAJOR >= 3 : __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define PELAB_CATCH2_VERSION 3
using Catch::Approx;  // in the global namespace, as Catch2 2 has it
#else
#include <catch2/catch.hpp>  // with CATCH_CONFIG_RUNNER defined first: the main() of main.cpp
#define PELAB_CATCH2_VERSION 2
#endif

#include <string>

namespace pelab::test {

// Matches a string that contains `part` (Catch2 2's Contains; 3 calls it ContainsSubstring,
// and its Contains looks for an element in a range).
inline auto ContainsText(const std::string& part) {
#if PELAB_CATCH2_VERSION == 3
  return Catch::Matchers::ContainsSubstring(part);
#else
  return Catch::Matchers::Contains(part);
#endif
}

}  // namespace pelab::test
