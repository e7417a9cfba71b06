// The one doctest main of emergent_tests; every other tests/*.cpp only holds TEST_CASEs.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
