// Smoke test of the build itself: the include path, C++20 designated initialisers in a constant
// expression, the error type that names the place at fault, and EMERGENT_SOURCE_DIR.
#include <doctest/doctest.h>

#include <emergent/core/error.hpp>
#include <emergent/core/shape.hpp>
#include <filesystem>
#include <string>

TEST_CASE("build smoke: Shape::d_head and require()") {
  constexpr emergent::Shape shape{.d_model = 12, .heads = 3};
  static_assert(shape.valid());
  CHECK(shape.d_head() == 4);

  CHECK_NOTHROW(emergent::require(true, "where", "what"));
  CHECK_THROWS_WITH_AS(emergent::require(false, "where", "what"), "where: what", emergent::Error);
}

TEST_CASE("build smoke: EMERGENT_SOURCE_DIR finds the golden fixtures") {
  const std::filesystem::path source_dir = EMERGENT_SOURCE_DIR;
  CHECK(std::filesystem::is_directory(source_dir / "tests" / "golden"));
}
