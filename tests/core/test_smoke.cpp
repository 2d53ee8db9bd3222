// Placeholder replaced below.
#include <catch2/catch.hpp>
