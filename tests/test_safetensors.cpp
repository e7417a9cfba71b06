// Tests of io/safetensors.hpp: round trips, fp16/bf16 conversions, hand-written files, and every
// kind of truncated or hostile input (each must throw emergent::Error naming file and tensor).
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <emergent/io/safetensors.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string u64_le(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i)
    s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a header text and a data section.
std::string make_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

// The message of the emergent::Error thrown when opening `bytes` as a file named `name`
// (and reading every fp32-convertible tensor); fails the test if nothing is thrown.
std::string open_error(const TempDir& tmp, const std::string& name, const std::string& bytes) {
  const fs::path p = tmp / name;
  write_bytes(p, bytes);
  try {
    emergent::SafetensorsFile f(p);
    for (const auto& n : f.names()) (void)f.read_f32(n);
  } catch (const emergent::Error& e) {
    return e.what();
  }
  FAIL("no emergent::Error for " << name);
  return {};
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

}  // namespace

TEST_CASE("safetensors: round trip keeps bits, shapes, order and metadata") {
  TempDir tmp;
  const fs::path p = tmp / "model.safetensors";
  std::vector<float> a = {1.0f,  -2.5f, 3.25f, std::numeric_limits<float>::denorm_min(),
                          -0.0f, 1e30f};
  std::vector<float> scalar = {42.0f};
  std::vector<float> empty;
  std::vector<float> halfs = {1.0f, -2.0f, 65504.0f, 0.5f, std::ldexp(1.0f, -24), 0.0f};
  std::vector<float> bfs = {1.0f, -2.0f, 3.0f, 0.15625f};
  std::vector<float> nonfinite = {std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> big(1000);
  for (auto& v : big) v = normal(rng);

  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"step", "100"}, {"note", "a \"quoted\" \n line"}};
  emergent::write_safetensors(p,
                              {{"z.first", {2, 3}, a},
                               {"scalar", {}, scalar},
                               {"empty", {0, 4}, empty},
                               {"half", {3, 2}, halfs, "F16"},
                               {"brain", {4}, bfs, "BF16"},
                               {"a.nonfinite", {3}, nonfinite},
                               {"big", {10, 10, 10}, big}},
                              meta);
  CHECK_FALSE(fs::exists(tmp / "model.safetensors.tmp"));

  const std::string raw = read_bytes(p);
  std::uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  CHECK((8 + n) % 8 == 0);

  emergent::SafetensorsFile f(p);
  CHECK(f.path() == p);
  CHECK(f.names() == std::vector<std::string>{"z.first", "scalar", "empty", "half", "brain",
                                              "a.nonfinite", "big"});
  CHECK(f.size() == 7);
  CHECK(f.metadata() == meta);
  CHECK(f.contains("half"));
  CHECK_FALSE(f.contains("missing"));

  const auto& ia = f.info("z.first");
  CHECK(ia.dtype == "F32");
  CHECK(ia.shape == std::vector<std::int64_t>{2, 3});
  CHECK(ia.numel == 6);
  CHECK(ia.bytes.size() == 24);
  const auto ra = f.read_f32("z.first");
  REQUIRE(ra.size() == a.size());
  CHECK(std::memcmp(ra.data(), a.data(), 24) == 0);

  CHECK(f.info("scalar").shape.empty());
  CHECK(f.info("scalar").numel == 1);
  CHECK(f.read_f32("scalar") == scalar);
  CHECK(f.info("empty").numel == 0);
  CHECK(f.info("empty").bytes.empty());
  CHECK(f.read_f32("empty").empty());

  CHECK(f.info("half").dtype == "F16");
  CHECK(f.info("half").bytes.size() == 12);
  CHECK(f.read_f32("half") == halfs);  // every value is exactly representable in fp16
  CHECK(f.info("brain").dtype == "BF16");
  CHECK(f.read_f32("brain") == bfs);

  const auto nf = f.read_f32("a.nonfinite");
  CHECK(std::isinf(nf[0]));
  CHECK(nf[0] > 0);
  CHECK(std::isinf(nf[1]));
  CHECK(nf[1] < 0);
  CHECK(std::isnan(nf[2]));
  CHECK(bits(nf[2]) == bits(nonfinite[2]));

  std::vector<float> dst(1000);
  f.read_f32_into("big", dst, {10, 10, 10});
  CHECK(std::memcmp(dst.data(), big.data(), 4000) == 0);

  // Moving keeps the mapping (and the spans into it) valid.
  const auto* before = f.info("big").bytes.data();
  emergent::SafetensorsFile g(std::move(f));
  CHECK(g.info("big").bytes.data() == before);
  CHECK(g.read_f32("big") == big);
  emergent::SafetensorsFile h(p);
  h = std::move(g);
  CHECK(h.read_f32("z.first").size() == 6);
}

TEST_CASE("safetensors: f16 conversions against known bit patterns") {
  using emergent::f16_to_f32;
  using emergent::f32_to_f16;
  CHECK(f16_to_f32(0x3c00) == 1.0f);
  CHECK(f16_to_f32(0xc000) == -2.0f);
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));            // smallest subnormal
  CHECK(f16_to_f32(0x03ff) == 1023.0f * std::ldexp(1.0f, -24));  // largest subnormal
  CHECK(f16_to_f32(0x0400) == std::ldexp(1.0f, -14));            // smallest normal
  CHECK(f16_to_f32(0x8001) == -std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x3555) == 0.333251953125f);
  CHECK(bits(f16_to_f32(0x0000)) == 0x00000000u);
  CHECK(bits(f16_to_f32(0x8000)) == 0x80000000u);
  CHECK(bits(f16_to_f32(0x7c00)) == 0x7f800000u);
  CHECK(bits(f16_to_f32(0xfc00)) == 0xff800000u);
  CHECK(std::isnan(f16_to_f32(0x7e00)));
  CHECK(std::isnan(f16_to_f32(0x7c01)));
  CHECK(std::isnan(f16_to_f32(0xfe00)));

  CHECK(f32_to_f16(1.0f) == 0x3c00);
  CHECK(f32_to_f16(-2.0f) == 0xc000);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65519.0f) == 0x7bff);  // below the halfway point to 65536
  CHECK(f32_to_f16(65520.0f) == 0x7c00);  // halfway, ties to even -> inf
  CHECK(f32_to_f16(1e10f) == 0x7c00);
  CHECK(f32_to_f16(-1e10f) == 0xfc00);
  CHECK(f32_to_f16(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);  // tie -> even (0)
  CHECK(f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);  // above the tie
  CHECK(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 ulp tie -> even (2)
  CHECK(f32_to_f16(std::ldexp(1.0f, -14)) == 0x0400);
  CHECK(f32_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);      // rounds up into the normals
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie -> even
  CHECK(f32_to_f16(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);  // tie -> even
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(1e-30f) == 0x0000);
  const std::uint16_t nan16 = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan16 & 0x7c00) == 0x7c00);
  CHECK((nan16 & 0x03ff) != 0);

  // Every half survives f16 -> f32 -> f16 (NaNs stay NaN).
  int mismatches = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto h16 = static_cast<std::uint16_t>(h);
    const std::uint16_t back = f32_to_f16(f16_to_f32(h16));
    const bool is_nan = (h16 & 0x7c00) == 0x7c00 && (h16 & 0x3ff) != 0;
    if (is_nan ? !std::isnan(f16_to_f32(back)) : back != h16) ++mismatches;
  }
  CHECK(mismatches == 0);

  // Independent oracle: double arithmetic. The nearest half to x, ties to even, for x in range.
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::uint32_t> any;
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-28, 16);
  int wrong = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(unit(rng), expo(rng));
    if (std::fabs(x) >= 65520.0f) continue;
    const std::uint16_t h = f32_to_f16(x);
    const double got = f16_to_f32(h);
    // Neighbours of h toward zero / away from zero.
    const double err = std::fabs(got - static_cast<double>(x));
    const std::uint16_t up = static_cast<std::uint16_t>(h + 1),
                        down = static_cast<std::uint16_t>(h - 1);
    const bool up_ok = (h & 0x7fff) < 0x7bff;
    const bool down_ok = (h & 0x7fff) > 0;
    if (up_ok && std::fabs(f16_to_f32(up) - static_cast<double>(x)) < err) ++wrong;
    if (down_ok && std::fabs(f16_to_f32(down) - static_cast<double>(x)) < err) ++wrong;
    if (up_ok && std::fabs(f16_to_f32(up) - static_cast<double>(x)) == err && (h & 1)) ++wrong;
    if (down_ok && std::fabs(f16_to_f32(down) - static_cast<double>(x)) == err && (h & 1)) ++wrong;
  }
  CHECK(wrong == 0);

#ifdef __FLT16_MAX__
  // Second oracle: the compiler's own _Float16 conversion (round to nearest even).
  int differ = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(any(rng));
    if (std::isnan(x)) continue;
    const _Float16 c = static_cast<_Float16>(x);
    std::uint16_t cb;
    std::memcpy(&cb, &c, 2);
    if (cb != f32_to_f16(x)) ++differ;
  }
  CHECK(differ == 0);
#endif

  const std::vector<std::uint16_t> hs = {0x3c00, 0xc000, 0x7bff};
  CHECK(emergent::f16_to_f32(std::span<const std::uint16_t>(hs)) ==
        std::vector<float>{1.0f, -2.0f, 65504.0f});
  const std::vector<float> fs3 = {1.0f, -2.0f, 65504.0f};
  CHECK(emergent::f32_to_f16(std::span<const float>(fs3)) == hs);
}

TEST_CASE("safetensors: bf16 conversions against known bit patterns") {
  using emergent::bf16_to_f32;
  using emergent::f32_to_bf16;
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0xc000) == -2.0f);
  CHECK(bf16_to_f32(0x7f7f) == std::bit_cast<float>(0x7f7f0000u));
  CHECK(bits(bf16_to_f32(0x7f80)) == 0x7f800000u);
  CHECK(bits(bf16_to_f32(0xff80)) == 0xff800000u);
  CHECK(std::isnan(bf16_to_f32(0x7fc0)));
  CHECK(bf16_to_f32(0x0001) == std::bit_cast<float>(0x00010000u));  // subnormal

  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(f32_to_bf16(-2.0f) == 0xc000);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie -> even
  CHECK(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)) == 0x3f82);  // tie -> even
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to inf
  CHECK(f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  const std::uint16_t nan =
      f32_to_bf16(std::bit_cast<float>(0x7f800001u));  // payload only in low bits
  CHECK(std::isnan(bf16_to_f32(nan)));
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto b16 = static_cast<std::uint16_t>(b);
    if (std::isnan(bf16_to_f32(b16))) continue;
    if (f32_to_bf16(bf16_to_f32(b16)) != b16) {
      FAIL("bf16 round trip " << b);
    }
  }
}

TEST_CASE("safetensors: hand-written F16, BF16, F64 and I32 files") {
  TempDir tmp;
  const fs::path p = tmp / "hand.safetensors";
  // 1.0, -2.0, 65504, 2^-24 as little-endian halfs; then 1.0, -2.0 as bf16; then F64 0.5; I32 7.
  std::string data =
      std::string("\x00\x3c\x00\xc0\xff\x7b\x01\x00", 8) + std::string("\x80\x3f\x00\xc0", 4);
  double half = 0.5;
  data += std::string(reinterpret_cast<const char*>(&half), 8);
  data += std::string("\x07\x00\x00\x00", 4);
  // Leading and trailing whitespace in the header are allowed.
  const std::string header =
      "  {\"w\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
      "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[12,20]},"
      "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[20,24]},"
      "\"__metadata__\":{\"format\":\"pt\"}}   ";
  write_bytes(p, make_file(header, data));
  emergent::SafetensorsFile f(p);
  CHECK(f.names() == std::vector<std::string>{"w", "b", "d", "i"});
  CHECK(f.read_f32("w") == std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)});
  CHECK(f.read_f32("b") == std::vector<float>{1.0f, -2.0f});
  CHECK(f.read_f32("d") == std::vector<float>{0.5f});
  CHECK(f.metadata().at("format") == "pt");
  std::int32_t seven = 0;
  std::memcpy(&seven, f.info("i").bytes.data(), 4);
  CHECK(seven == 7);
  try {
    (void)f.read_f32("i");
    FAIL("I32 read as fp32");
  } catch (const emergent::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("hand.safetensors") != std::string::npos);
    CHECK(m.find("'i'") != std::string::npos);
    CHECK(m.find("I32") != std::string::npos);
  }
  try {
    (void)f.info("nope");
    FAIL("unknown tensor");
  } catch (const emergent::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("hand.safetensors") != std::string::npos);
    CHECK(m.find("'nope'") != std::string::npos);
  }
}

TEST_CASE("safetensors: truncated files") {
  TempDir tmp;
  const fs::path good = tmp / "good.safetensors";
  std::vector<float> w(20, 1.5f);
  emergent::write_safetensors(good, {{"layers.0.w", {4, 5}, w}});
  const std::string raw = read_bytes(good);

  SUBCASE("data section cut") {
    const std::string m = open_error(tmp, "cut_data.safetensors", raw.substr(0, raw.size() - 4));
    CHECK(m.find("cut_data.safetensors") != std::string::npos);
    CHECK(m.find("'layers.0.w'") != std::string::npos);
    CHECK(m.find("out of bounds") != std::string::npos);
    CHECK(m.find("truncated") != std::string::npos);
  }
  SUBCASE("header cut") {
    const std::string m = open_error(tmp, "cut_header.safetensors", raw.substr(0, 8 + 10));
    CHECK(m.find("cut_header.safetensors") != std::string::npos);
    CHECK(m.find("truncated header") != std::string::npos);
  }
  SUBCASE("length field cut") {
    const std::string m = open_error(tmp, "cut_len.safetensors", raw.substr(0, 5));
    CHECK(m.find("cut_len.safetensors") != std::string::npos);
    CHECK(m.find("truncated") != std::string::npos);
  }
  SUBCASE("empty file") {
    const std::string m = open_error(tmp, "empty.safetensors", "");
    CHECK(m.find("empty.safetensors") != std::string::npos);
    CHECK(m.find("truncated") != std::string::npos);
  }
  SUBCASE("missing file and directory") {
    try {
      emergent::SafetensorsFile f(tmp / "absent.safetensors");
      FAIL("opened a missing file");
    } catch (const emergent::Error& e) {
      CHECK(std::string(e.what()).find("absent.safetensors") != std::string::npos);
      CHECK(std::string(e.what()).find("cannot open") != std::string::npos);
    }
    try {
      emergent::SafetensorsFile f(tmp.path);
      FAIL("opened a directory");
    } catch (const emergent::Error& e) {
      CHECK(std::string(e.what()).find("not a regular file") != std::string::npos);
    }
  }
}

TEST_CASE("safetensors: hostile headers throw emergent::Error naming file, tensor and field") {
  TempDir tmp;
  const std::string f80(80, '\0');
  auto entry = [](const std::string& name, const std::string& body) {
    return "{\"" + name + "\":{" + body + "}}";
  };
  auto has = [](const std::string& m, const std::string& part) {
    INFO(m);
    CHECK(m.find(part) != std::string::npos);
  };

  SUBCASE("header length larger than the file") {
    const std::string m = open_error(tmp, "long.safetensors", u64_le(1000) + "{}");
    has(m, "long.safetensors");
    has(m, "truncated header");
  }
  SUBCASE("header length 2^63 and 2^64-1") {
    has(open_error(tmp, "huge.safetensors", u64_le(std::uint64_t{1} << 63) + "{}"),
        "huge.safetensors");
    has(open_error(tmp, "huge2.safetensors", u64_le(~std::uint64_t{0}) + "{}"), "exceeds");
  }
  SUBCASE("header length over the 100 MB limit (sparse file)") {
    const fs::path p = tmp / "sparse.safetensors";
    write_bytes(p, u64_le(100'000'001));
    fs::resize_file(p, 100'000'100);
    try {
      emergent::SafetensorsFile f(p);
      FAIL("accepted a 100 MB header");
    } catch (const emergent::Error& e) {
      has(e.what(), "sparse.safetensors");
      has(e.what(), "limit");
    }
  }
  SUBCASE("empty header, invalid JSON, not an object, invalid UTF-8") {
    has(open_error(tmp, "zero.safetensors", u64_le(0)), "not valid JSON");
    const std::string m = open_error(tmp, "bad.safetensors", make_file("{not json", ""));
    has(m, "bad.safetensors");
    has(m, "not valid JSON");
    const std::string m2 = open_error(tmp, "array.safetensors", make_file("[1, 2]", ""));
    has(m2, "array.safetensors");
    has(m2, "not a JSON object");
    has(open_error(tmp, "utf8.safetensors", make_file("{\"\xff\xfe\":{}}", "")), "not valid JSON");
    has(open_error(tmp, "nul.safetensors", make_file(std::string("{}\0", 3), "")),
        "not valid JSON");
  }
  SUBCASE("deep nesting") {
    const std::string deep = "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    has(open_error(tmp, "deep.safetensors", make_file(deep, "")), "nested");
  }
  SUBCASE("duplicate keys") {
    const std::string e = "{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}";
    const std::string m =
        open_error(tmp, "dup.safetensors", make_file("{\"w\":" + e + ",\"w\":" + e + "}", "x"));
    has(m, "dup.safetensors");
    has(m, "duplicate key 'w'");
    const std::string m2 = open_error(
        tmp, "dup2.safetensors",
        make_file(
            "{\"w\":{\"dtype\":\"U8\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1]}}",
            "x"));
    has(m2, "duplicate key 'dtype'");
  }
  SUBCASE("offsets out of bounds") {
    const std::string m = open_error(
        tmp, "oob.safetensors",
        make_file(entry("layers.0.w", "\"dtype\":\"F32\",\"shape\":[4,5],\"data_offsets\":[0,80]"),
                  f80.substr(0, 40)));
    has(m, "oob.safetensors");
    has(m, "tensor 'layers.0.w'");
    has(m, "data_offsets [0, 80] out of bounds");
    const std::string m2 = open_error(
        tmp, "oob2.safetensors",
        make_file(entry("w",
                        "\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[18446744073709551615,"
                        "18446744073709551615]"),
                  ""));
    has(m2, "out of bounds");
  }
  SUBCASE("begin > end") {
    const std::string m = open_error(
        tmp, "rev.safetensors",
        make_file(entry("w", "\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]"), "abc"));
    has(m, "tensor 'w'");
    has(m, "begin > end");
  }
  SUBCASE("overlapping tensors") {
    const std::string h =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}";
    const std::string m =
        open_error(tmp, "overlap.safetensors", make_file(h, std::string(24, '\0')));
    has(m, "overlap.safetensors");
    has(m, "tensor 'b'");
    has(m, "overlaps tensor 'a'");
    // A zero-size tensor inside another one also overlaps.
    const std::string h2 =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}";
    has(open_error(tmp, "overlap2.safetensors", make_file(h2, std::string(16, '\0'))), "overlaps");
    // Identical ranges.
    const std::string h3 =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
        "\"c\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    has(open_error(tmp, "overlap3.safetensors", make_file(h3, std::string(16, '\0'))), "overlaps");
  }
  SUBCASE("offsets do not match dtype x shape") {
    const std::string m =
        open_error(tmp, "model.safetensors",
                   make_file(entry("layers.0.mlp.fc.weight",
                                   "\"dtype\":\"F32\",\"shape\":[4,5],\"data_offsets\":[0,96]"),
                             std::string(96, '\0')));
    has(m, (tmp / "model.safetensors").string() +
               ": tensor 'layers.0.mlp.fc.weight': data_offsets [0, 96] do not match dtype F32 x "
               "shape [4, 5] = 80 bytes");
  }
  SUBCASE("negative, fractional, huge and non-numeric dims") {
    const std::string m = open_error(
        tmp, "neg.safetensors",
        make_file(entry("w", "\"dtype\":\"F32\",\"shape\":[4,-5],\"data_offsets\":[0,0]"), ""));
    has(m, "neg.safetensors");
    has(m, "tensor 'w'");
    has(m, "shape[1] = -5");
    has(open_error(
            tmp, "frac.safetensors",
            make_file(entry("w", "\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,0]"), "")),
        "shape[0] = 2.5");
    has(open_error(
            tmp, "u64dim.safetensors",
            make_file(
                entry("w",
                      "\"dtype\":\"F32\",\"shape\":[18446744073709551615],\"data_offsets\":[0,0]"),
                "")),
        "shape[0]");
    has(open_error(
            tmp, "strdim.safetensors",
            make_file(entry("w", "\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,0]"),
                      "")),
        "shape[0]");
    has(open_error(
            tmp, "shapeobj.safetensors",
            make_file(entry("w", "\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,0]"), "")),
        "field 'shape' is not an array");
  }
  SUBCASE("shape product overflow") {
    const std::string m = open_error(
        tmp, "overflow.safetensors",
        make_file(
            entry("w",
                  "\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,0]"),
            ""));
    has(m, "overflow.safetensors");
    has(m, "tensor 'w'");
    has(m, "overflow");
    // numel fits but numel * 8 does not.
    has(open_error(
            tmp, "overflow2.safetensors",
            make_file(
                entry("w",
                      "\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]"),
                "")),
        "overflow");
    // An overflowing product times a zero dimension is an empty tensor.
    const fs::path p = tmp / "zero_dim.safetensors";
    write_bytes(
        p,
        make_file(
            entry("w",
                  "\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,0]"),
            ""));
    emergent::SafetensorsFile f(p);
    CHECK(f.info("w").numel == 0);
  }
  SUBCASE("unknown dtypes") {
    for (const std::string dt : {"F8_E4M3", "I16", "C64", "f32", ""}) {
      const std::string m = open_error(
          tmp, "dtype.safetensors",
          make_file(entry("w", "\"dtype\":\"" + dt + "\",\"shape\":[1],\"data_offsets\":[0,1]"),
                    "abcdefgh"));
      has(m, "dtype.safetensors");
      has(m, "tensor 'w'");
      has(m, "dtype '" + dt + "' is not supported");
    }
    has(open_error(
            tmp, "dtype_num.safetensors",
            make_file(entry("w", "\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]"), "abcd")),
        "field 'dtype' is not a string");
  }
  SUBCASE("missing fields and malformed entries") {
    has(open_error(tmp, "m1.safetensors",
                   make_file(entry("w", "\"shape\":[1],\"data_offsets\":[0,4]"), "abcd")),
        "missing field 'dtype'");
    has(open_error(tmp, "m2.safetensors",
                   make_file(entry("w", "\"dtype\":\"F32\",\"data_offsets\":[0,4]"), "abcd")),
        "missing field 'shape'");
    has(open_error(tmp, "m3.safetensors",
                   make_file(entry("w", "\"dtype\":\"F32\",\"shape\":[1]"), "abcd")),
        "missing field 'data_offsets'");
    has(open_error(tmp, "m4.safetensors",
                   make_file(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]"),
                             "abcdefgh")),
        "'data_offsets' is not an array");
    has(open_error(tmp, "m5.safetensors",
                   make_file(entry("w", "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]"),
                             "abcd")),
        "not non-negative integers");
    has(open_error(tmp, "m6.safetensors", make_file("{\"w\":[1,2]}", "")),
        "tensor 'w': entry is not a JSON object");
    has(open_error(tmp, "m7.safetensors", make_file("{\"__metadata__\":{\"a\":1}}", "")),
        "__metadata__: value of 'a' is not a string");
    has(open_error(tmp, "m8.safetensors", make_file("{\"__metadata__\":[]}", "")),
        "__metadata__ is not a JSON object");
    has(open_error(
            tmp, "ctl.safetensors",
            make_file(entry("a\\u0001b", "\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]"),
                      "abcd")),
        "tensor 'a\\x01b'");
  }
}

TEST_CASE("safetensors: atomic write replaces only on success") {
  TempDir tmp;
  const fs::path p = tmp / "ckpt.safetensors";
  const std::vector<float> v1 = {1, 2, 3, 4};
  const std::vector<float> v2 = {5, 6, 7, 8};
  emergent::write_safetensors(p, {{"w", {2, 2}, v1}});
  CHECK_FALSE(fs::exists(tmp / "ckpt.safetensors.tmp"));
  const std::string before = read_bytes(p);

  // Invalid requests throw before touching anything.
  CHECK_THROWS_AS(emergent::write_safetensors(p, {{"w", {3, 2}, v2}}), emergent::Error);
  CHECK_THROWS_AS(emergent::write_safetensors(p, {{"w", {-1, -4}, v2}}), emergent::Error);
  CHECK_THROWS_AS(emergent::write_safetensors(p, {{"w", {4}, v2}, {"w", {4}, v2}}),
                  emergent::Error);
  CHECK_THROWS_AS(emergent::write_safetensors(p, {{"__metadata__", {4}, v2}}), emergent::Error);
  CHECK_THROWS_AS(emergent::write_safetensors(p, {{"w", {4}, v2, "I32"}}), emergent::Error);
  CHECK_THROWS_AS(emergent::write_safetensors(p, {{"w", {1ll << 40, 1ll << 40, 1ll << 40}, v2}}),
                  emergent::Error);
  try {
    emergent::write_safetensors(p, {{"w", {3, 2}, v2}});
  } catch (const emergent::Error& e) {
    CHECK(std::string(e.what()).find("ckpt.safetensors") != std::string::npos);
    CHECK(std::string(e.what()).find("'w'") != std::string::npos);
  }
  CHECK(read_bytes(p) == before);
  CHECK_FALSE(fs::exists(tmp / "ckpt.safetensors.tmp"));

  // A failure after the temporary file was written (the rename fails: the target is a
  // non-empty directory) leaves the target as it was and removes the temporary file.
  const fs::path d = tmp / "dir.safetensors";
  fs::create_directories(d / "inner");
  try {
    emergent::write_safetensors(d, {{"w", {4}, v2}});
    FAIL("renamed over a directory");
  } catch (const emergent::Error& e) {
    CHECK(std::string(e.what()).find("dir.safetensors") != std::string::npos);
    CHECK(std::string(e.what()).find("rename") != std::string::npos);
  }
  CHECK(fs::is_directory(d / "inner"));
  CHECK_FALSE(fs::exists(tmp / "dir.safetensors.tmp"));

  // Unwritable location: error names the temporary path, nothing is created.
  CHECK_THROWS_AS(
      emergent::write_safetensors(tmp / "no_such_dir" / "x.safetensors", {{"w", {4}, v2}}),
      emergent::Error);

  // Success replaces the file; a stale .tmp from a killed run is overwritten and removed;
  // a reader that had the old file open keeps seeing the old contents.
  write_bytes(tmp / "ckpt.safetensors.tmp", "garbage from a killed run");
  emergent::SafetensorsFile old(p);
  emergent::write_safetensors(p, {{"w", {4}, v2}}, {{"step", "2"}});
  CHECK_FALSE(fs::exists(tmp / "ckpt.safetensors.tmp"));
  emergent::SafetensorsFile now(p);
  CHECK(now.read_f32("w") == v2);
  CHECK(now.metadata().at("step") == "2");
  CHECK(old.read_f32("w") == v1);
  CHECK(old.info("w").shape == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("safetensors: read_f32_into checks the shape") {
  TempDir tmp;
  const fs::path p = tmp / "shape.safetensors";
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  emergent::write_safetensors(p, {{"blocks.1.attn.w", {2, 3}, v}});
  emergent::SafetensorsFile f(p);
  std::vector<float> dst(6);
  try {
    f.read_f32_into("blocks.1.attn.w", dst, {3, 2});
    FAIL("wrong shape accepted");
  } catch (const emergent::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("shape.safetensors") != std::string::npos);
    CHECK(m.find("'blocks.1.attn.w'") != std::string::npos);
    CHECK(m.find("[2, 3]") != std::string::npos);
    CHECK(m.find("[3, 2]") != std::string::npos);
  }
  CHECK_THROWS_AS(f.read_f32_into("blocks.1.attn.w", dst, {6}), emergent::Error);
  std::vector<float> small(5);
  CHECK_THROWS_AS(f.read_f32_into("blocks.1.attn.w", small, {2, 3}), emergent::Error);
  f.read_f32_into("blocks.1.attn.w", dst, {2, 3});
  CHECK(dst == v);
}
