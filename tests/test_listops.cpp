// ListOps (tasks/listops.hpp): the evaluator on hand-worked expressions, malformed ones refused,
// LRA's serialisation, and the generator: its examples evaluate to their labels, lie inside the
// length bounds, are pure functions of (seed, split, index), and have LRA's statistics
// (docs/paper-notes.md §7). tests/listops/lra_oracle.py checks exported examples in Python.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/tasks/listops.hpp>
#include <string>
#include <vector>

using emergent::ListOps;
namespace listops = emergent::listops;

namespace {

int value_of(const std::string& text) { return listops::evaluate(listops::from_text(text)); }

// Operators, digits and closers of a token sequence, and the deepest nesting of lists.
struct TreeCounts {
  int operators = 0, closers = 0, digits = 0, depth = 0;
};

TreeCounts counts(const std::vector<std::int32_t>& tokens) {
  TreeCounts c;
  int open = 0;
  for (std::int32_t t : tokens) {
    if (listops::is_operator(t)) c.operators++, c.depth = std::max(c.depth, ++open);
    if (t == listops::close) c.closers++, open--;
    if (listops::is_digit(t)) c.digits++;
  }
  return c;
}

}  // namespace

TEST_CASE("ListOps evaluates hand-worked expressions as LRA's to_value does") {
  CHECK(value_of("7") == 7);
  CHECK(value_of("[MIN 8 2 [MIN 8 6 ] ]") == 2);  // min(8, 2, min(8, 6)) = 2
  CHECK(value_of("[MAX 1 [MIN 4 5 ] 3 ]") == 4);  // max(1, 4, 3)
  CHECK(value_of("[SM 9 8 7 ]") == 4);            // 24 mod 10
  CHECK(value_of("[MED 1 9 3 ]") == 3);           // odd count: the middle value
  CHECK(value_of("[MED 1 2 ]") == 1);             // int(np.median([1, 2])) = int(1.5) = 1
  CHECK(value_of("[MED 0 3 8 9 ]") == 5);         // (3 + 8) / 2 = 5.5 -> 5
  CHECK(value_of("[SM [MAX 2 9 ] [MED 4 4 5 6 ] 3 ]") == 6);               // 9 + 4 + 3 = 16 -> 6
  CHECK(value_of("[MAX 2 9 X") == 9);                                      // LRA's spelling of "]"
  CHECK(value_of("[MIN [MAX [SM 5 5 ] [MED 7 1 ] ] [SM 3 4 ] 9 ]") == 4);  // min(4, 7, 9)
}

TEST_CASE("ListOps refuses malformed expressions, naming what is wrong") {
  for (const char* bad : {"", "[MIN 3", "3 ]", "[MIN ]", "3 4", "[MIN 3 ] 4", "[FIRST 1 2 ]"})
    CHECK_THROWS_AS(value_of(bad), emergent::Error);
  CHECK_THROWS_WITH(value_of("[MIN 3"), doctest::Contains("ends with an unclosed list"));
  CHECK_THROWS_WITH(value_of("3 ]"), doctest::Contains("token 1"));
  CHECK_THROWS_WITH(value_of("[X 1 ]"), doctest::Contains("'[X'"));
}

TEST_CASE("ListOps writes LRA's Source serialisation") {
  // The example of docs/paper-notes.md §7, generated there by LRA's rules.
  CHECK(listops::to_lra_source(listops::from_text("[MIN 8 2 [MIN 8 6 ] ]")) ==
        "( ( ( ( [MIN 8 ) 2 ) ( ( ( [MIN 8 ) 6 ) ] ) ) ] )");
  CHECK(listops::to_lra_source(listops::from_text("4")) == "4");
  CHECK(listops::to_text(listops::from_text("[SM 1 [MED 2 3 X ]")) == "[SM 1 [MED 2 3 ] ]");
}

TEST_CASE("ListOps examples: labels from the evaluator, lengths and depths inside the bounds") {
  const ListOps task(20, 120, 6, 5);
  for (std::uint64_t i = 0; i < 300; ++i) {
    const listops::Example e = task.example(7, ListOps::Split::train, i);
    const int length = static_cast<int>(e.tokens.size());
    CAPTURE(i);
    CHECK(length > 20);
    CHECK(length < 120);
    CHECK(listops::evaluate(e.tokens) == e.label);
    const TreeCounts c = counts(e.tokens);
    CHECK(c.operators == c.closers);
    CHECK(c.depth <= 5);  // operators only at depths 1..max_depth-1
    CHECK(c.operators + c.closers + c.digits == length);
  }
}

TEST_CASE("ListOps examples are pure functions of (seed, split, index)") {
  const ListOps task(30, 200, 10, 10);
  CHECK(task.example(1, ListOps::Split::train, 5).tokens ==
        task.example(1, ListOps::Split::train, 5).tokens);
  CHECK(task.example(1, ListOps::Split::train, 5).tokens !=
        task.example(1, ListOps::Split::train, 6).tokens);
  CHECK(task.example(1, ListOps::Split::train, 5).tokens !=
        task.example(1, ListOps::Split::test, 5).tokens);
  CHECK(task.example(1, ListOps::Split::train, 5).tokens !=
        task.example(2, ListOps::Split::train, 5).tokens);
}

TEST_CASE("ListOps at LRA's settings has LRA's statistics") {
  // A Python re-run of LRA's exact rules (docs/paper-notes.md §7, 3,000 trees): mean length
  // ~1,064, labels 0 and 9 ~17% each (long MIN and MAX lists saturate), the others 7.5-9%.
  const ListOps task(500, 2000, 10, 10);
  constexpr int n = 400;
  std::array<int, 10> labels{};
  double length_sum = 0;
  for (int i = 0; i < n; ++i) {
    const listops::Example e = task.example(3, ListOps::Split::train, i);
    labels[e.label]++;
    length_sum += e.tokens.size();
  }
  CHECK(length_sum / n == doctest::Approx(1064).epsilon(0.08));
  CHECK(double(labels[0]) / n == doctest::Approx(0.17).epsilon(0.35));
  CHECK(double(labels[9]) / n == doctest::Approx(0.17).epsilon(0.35));
  for (int d = 1; d <= 8; ++d) CHECK(double(labels[d]) / n < 0.14);
}

TEST_CASE("ListOps refuses bounds that no tree can meet") {
  CHECK_THROWS_AS(ListOps(10, 11, 10, 10), emergent::Error);
  CHECK_THROWS_AS(ListOps(10, 100, 1, 10), emergent::Error);
  CHECK_THROWS_AS(ListOps(10, 100, 10, 1), emergent::Error);
}
