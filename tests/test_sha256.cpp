// Tests of io/sha256.hpp: the FIPS 180-4 / NIST example vectors, padding edges around the
// 56- and 64-byte block boundaries (digests from Python's hashlib), and incremental updates.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <emergent/io/sha256.hpp>
#include <string>
#include <utility>
#include <vector>

namespace {

std::vector<std::byte> pattern_bytes(std::size_t n) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 7 + 3) % 256);
  return out;
}

}  // namespace

TEST_CASE("sha256: FIPS 180-4 example vectors") {
  using emergent::sha256_hex;
  CHECK(sha256_hex(std::string_view("abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex(std::string_view("")) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string_view(
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
            "klmnopqrlmnopqrsmnopqrstnopqrstu")) ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  const std::string million_a(1'000'000, 'a');
  CHECK(sha256_hex(std::string_view(million_a)) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: padding at the block-boundary lengths") {
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
  };
  for (const auto& c : cases) {
    const std::size_t length = c.first;
    CAPTURE(length);
    CHECK(emergent::sha256_hex(pattern_bytes(length)) == c.second);
  }
}

TEST_CASE("sha256: any split into updates gives the one-shot digest") {
  const auto bytes = pattern_bytes(1000);
  const std::string whole = emergent::sha256_hex(bytes);
  for (const std::size_t piece : {1, 3, 63, 64, 65, 200, 999}) {
    CAPTURE(piece);
    emergent::Sha256 h;
    for (std::size_t i = 0; i < bytes.size(); i += piece)
      h.update(std::span<const std::byte>(bytes).subspan(i, std::min(piece, bytes.size() - i)));
    CHECK(h.hex_digest() == whole);
  }
}
