// Tests of io/tokenizer.hpp (byte-level BPE from tokenizer.json) against fixtures made by Hugging
// Face `tokenizers` (tests/golden/make_tokenizer_golden.py): encodings, decodings, vocabulary,
// both merges encodings, add_prefix_space/ignore_merges, the pre-tokenizer's character classes
// and NFC on every code point, and clean errors for bad files and bad input.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <emergent/io/tokenizer.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string fixture_dir = std::string(EMERGENT_SOURCE_DIR) + "/tests/golden/tokenizer/";

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return json::parse(in);
}

const json& golden() {
  static const json value = read_json(fixture_dir + "golden.json");
  return value;
}

std::vector<std::int32_t> ids_of(const json& array) {
  return array.get<std::vector<std::int32_t>>();
}

// Message of the emergent::Error that `load` throws (fails the test if it throws nothing).
std::string error_message(const std::function<void()>& load) {
  try {
    load();
  } catch (const emergent::Error& e) {
    return e.what();
  }
  FAIL("expected an emergent::Error");
  return "";
}

// Error message from loading fixture `name` after `edit` changed its JSON.
std::string error_after_edit(const std::string& name, const std::function<void(json&)>& edit) {
  json config = read_json(fixture_dir + name);
  edit(config);
  TempDir temp;
  const fs::path path = temp.write("tokenizer.json", config.dump(1));
  const std::string message = error_message([&] { emergent::BpeTokenizer tokenizer(path); });
  CHECK(message.find(path.string()) == 0);  // names the file first
  return message;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string describe(const std::string& text) {
  std::ostringstream out;
  for (const unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F) {
      out << c;
    } else {
      out << "\\x" << std::hex << unsigned(c) << std::dec;
    }
  }
  return out.str();
}

}  // namespace

TEST_CASE("tokenizer: encode and decode match Hugging Face tokenizers, both merges encodings") {
  for (const char* file : {"tokenizer.json", "tokenizer_string_merges.json"}) {
    const emergent::BpeTokenizer tokenizer(fixture_dir + file);
    for (const json& c : golden()["cases"]) {
      const std::string text = c["text"];
      CAPTURE(file);
      CAPTURE(describe(text));
      const std::vector<std::int32_t> ids = tokenizer.encode(text);
      CHECK(ids == ids_of(c["ids"]));
      CHECK(tokenizer.decode(ids) == c["decoded"].get<std::string>());
      CHECK(tokenizer.decode(ids, /*skip_special_tokens=*/true) ==
            c["decoded_skip_special"].get<std::string>());
      // Round trip, up to NFC (the normalizer): exact for text already in NFC.
      const std::string normalized = emergent::unicode::nfc_utf8(text);
      CHECK(tokenizer.decode(ids) == normalized);
      if (normalized == text) CHECK(tokenizer.decode(tokenizer.encode(text)) == text);
    }
  }
}

TEST_CASE("tokenizer: add_prefix_space, no normalizer and ignore_merges match Hugging Face") {
  const emergent::BpeTokenizer tokenizer(fixture_dir + "tokenizer_prefix_space.json");
  for (const json& c : golden()["cases"]) {
    const std::string text = c["text"];
    CAPTURE(describe(text));
    const std::vector<std::int32_t> ids = tokenizer.encode(text);
    CHECK(ids == ids_of(c["prefix_space_ids"]));
    CHECK(tokenizer.decode(ids) == c["prefix_space_decoded"].get<std::string>());
  }
}

TEST_CASE("tokenizer: vocabulary, special tokens and decoding of single ids") {
  const emergent::BpeTokenizer tokenizer(fixture_dir + "tokenizer.json");
  const json& tokens = golden()["tokens"];
  REQUIRE(tokenizer.vocab_size() == golden()["vocab_size"].get<std::int32_t>());
  REQUIRE(tokens.size() == static_cast<std::size_t>(tokenizer.vocab_size()));
  const auto special_ids = golden()["special_ids"].get<std::set<std::int32_t>>();
  CHECK(special_ids == std::set<std::int32_t>{0, 1});
  for (std::int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    CAPTURE(id);
    const std::string token = tokens[static_cast<std::size_t>(id)];
    CHECK(tokenizer.id_to_token(id) == token);
    CHECK(tokenizer.token_to_id(token) == id);
    CHECK(tokenizer.is_special(id) == special_ids.contains(id));
    const std::vector<std::int32_t> one{id};
    const std::string decoded = golden()["single_id_decoded"][static_cast<std::size_t>(id)];
    CHECK(tokenizer.decode(one) == decoded);
    CHECK(tokenizer.decode(one, /*skip_special_tokens=*/true) ==
          (special_ids.contains(id) ? "" : decoded));
  }
  CHECK(tokenizer.token_to_id("<|endoftext|>") == 0);
  CHECK(tokenizer.token_to_id("  ") == tokenizer.vocab_size() - 1);
  CHECK_FALSE(tokenizer.token_to_id("no such token").has_value());
  CHECK(contains(error_message([&] { (void)tokenizer.id_to_token(tokenizer.vocab_size()); }),
                 "id_to_token: id"));
  const std::vector<std::int32_t> bad{5, -1};
  CHECK(
      contains(error_message([&] { (void)tokenizer.decode(bad); }), "decode: id -1 is not in 0.."));
}

TEST_CASE("tokenizer: decoding bytes that are not valid UTF-8 gives U+FFFD like Hugging Face") {
  const emergent::BpeTokenizer tokenizer(fixture_dir + "tokenizer.json");
  for (const json& c : golden()["invalid_utf8_decodes"]) {
    CAPTURE(c["ids"].dump());
    CHECK(tokenizer.decode(ids_of(c["ids"])) == c["decoded"].get<std::string>());
  }
}

TEST_CASE("tokenizer: pre-tokenizer classes agree with tokenizers on every code point") {
  using emergent::tokenizer_detail::CharClass;
  std::vector<CharClass> expected(0x110000, CharClass::other);
  for (const json& range : read_json(fixture_dir + "unicode_classes.json")) {
    const std::string cls = range[2];
    const CharClass value = cls == "L"   ? CharClass::letter
                            : cls == "N" ? CharClass::number
                                         : CharClass::white_space;
    for (auto cp = range[0].get<std::uint32_t>(); cp <= range[1].get<std::uint32_t>(); ++cp)
      expected[cp] = value;
  }
  std::size_t mismatches = 0;
  unsigned first_mismatch = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    if (emergent::tokenizer_detail::char_class(cp) != expected[cp] && mismatches++ == 0)
      first_mismatch = cp;
  }
  CAPTURE(first_mismatch);
  CHECK(mismatches == 0);
}

TEST_CASE("tokenizer: NFC agrees with tokenizers (Unicode 9.0 data) on every code point") {
  std::set<char32_t> listed;
  for (const json& c : read_json(fixture_dir + "nfc.json")) {
    const std::string input = c[0], expected = c[1];
    CAPTURE(describe(input));
    CHECK(emergent::unicode::nfc_utf8(input) == expected);
    const auto step = emergent::utf8::decode_at(input, 0);
    if (step.length == input.size()) listed.insert(step.code_point);
  }
  std::size_t changed = 0;
  unsigned first_changed = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || listed.contains(cp)) continue;
    const std::u32string one(1, cp);
    if (emergent::unicode::nfc(one) != one && changed++ == 0) first_changed = cp;
  }
  CAPTURE(first_changed);
  CHECK(changed == 0);
}

TEST_CASE("tokenizer: invalid UTF-8 input is a clear error") {
  const emergent::BpeTokenizer tokenizer(fixture_dir + "tokenizer.json");
  const auto message = [&](const std::string& text) {
    return error_message([&] { (void)tokenizer.encode(text); });
  };
  CHECK(message("\xff") == "BpeTokenizer::encode: invalid UTF-8 at byte 0 (0xFF)");
  CHECK(message("abc\xc3") == "BpeTokenizer::encode: invalid UTF-8 at byte 3 (0xC3)");
  CHECK(message("ok \xed\xa0\x80 surrogate") ==
        "BpeTokenizer::encode: invalid UTF-8 at byte 3 (0xED)");
  CHECK(message("\xc0\x80 overlong") == "BpeTokenizer::encode: invalid UTF-8 at byte 0 (0xC0)");
  CHECK(message("<|endoftext|>\xf4\x90\x80\x80") ==
        "BpeTokenizer::encode: invalid UTF-8 at byte 13 (0xF4)");
}

TEST_CASE("tokenizer: bad files give errors naming the file and the field") {
  const std::string missing = fixture_dir + "no_such_tokenizer.json";
  CHECK(error_message([&] { emergent::BpeTokenizer tokenizer(missing); }) ==
        missing + ": cannot open file");

  {
    TempDir temp;
    const fs::path path = temp.write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {)");
    const std::string message = error_message([&] { emergent::BpeTokenizer tokenizer(path); });
    CHECK(message.find(path.string() + ": invalid JSON: ") == 0);
  }

  CHECK(contains(error_after_edit("tokenizer.json", [](json& c) { c["model"].erase("vocab"); }),
                 ": model.vocab: missing"));
  CHECK(contains(error_after_edit("tokenizer.json",
                                  [](json& c) {
                                    c["model"]["merges"][12] = {"Ġt", "zzz"};
                                  }),
                 ": model.merges[12]: token \"zzz\" is not in model.vocab"));
  CHECK(contains(error_after_edit("tokenizer.json",
                                  [](json& c) {
                                    c["model"]["merges"][3] = {"q", "q"};
                                  }),
                 ": model.merges[3]: token \"qq\" is not in model.vocab"));
  CHECK(contains(
      error_after_edit("tokenizer_string_merges.json",
                       [](json& c) { c["model"]["merges"][7] = "a b c"; }),
      ": model.merges[7]: expected \"left right\" (two tokens and one space), got \"a b c\""));
  CHECK(contains(error_after_edit("tokenizer.json", [](json& c) { c["model"]["merges"][0] = 5; }),
                 ": model.merges[0]: expected \"left right\" or [\"left\", \"right\"], got 5"));
  CHECK(contains(
      error_after_edit("tokenizer.json", [](json& c) { c["model"]["vocab"]["h"] = "seven"; }),
      ": model.vocab[\"h\"]: expected a token id"));
  CHECK(
      contains(error_after_edit("tokenizer.json", [](json& c) { c["model"]["vocab"]["h"] = 5000; }),
               ": model.vocab: id 5000 for \"h\": ids must be 0..602"));
  CHECK(contains(error_after_edit("tokenizer.json", [](json& c) { c["model"]["vocab"]["h"] = 2; }),
                 ": model.vocab: id 2 names both"));
  CHECK(contains(
      error_after_edit("tokenizer.json", [](json& c) { c["model"]["type"] = "WordPiece"; }),
      ": model.type: 'WordPiece' is not supported (only BPE)"));
  CHECK(contains(error_after_edit("tokenizer.json",
                                  [](json& c) {
                                    c["normalizer"] = {{"type", "NFKC"}};
                                  }),
                 ": normalizer.type: 'NFKC' is not supported (supported: NFC, or null)"));
  CHECK(contains(error_after_edit("tokenizer.json", [](json& c) { c.erase("pre_tokenizer"); }),
                 ": pre_tokenizer: missing (supported: ByteLevel)"));
  CHECK(contains(
      error_after_edit("tokenizer.json", [](json& c) { c["added_tokens"][2]["lstrip"] = true; }),
      ": added_tokens[2].lstrip: true is not supported (only false)"));
  CHECK(
      contains(error_after_edit("tokenizer.json", [](json& c) { c["added_tokens"][0]["id"] = 7; }),
               ": added_tokens[0].id: 7 but model.vocab gives \"<|endoftext|>\" id 0"));
  CHECK(contains(error_after_edit("tokenizer.json", [](json& c) { c["model"]["dropout"] = 0.1; }),
                 ": model.dropout: only null is supported"));
}

TEST_CASE("tokenizer: input needing a byte that has no token is an error, not a silent drop") {
  json config = read_json(fixture_dir + "tokenizer.json");
  json& vocab = config["model"]["vocab"];
  vocab["~~"] = vocab["~"];  // '~' (byte 0x7E) is in no merge; the ids stay 0..N-1
  vocab.erase("~");
  TempDir temp;
  const fs::path path = temp.write("tokenizer.json", config.dump());
  const emergent::BpeTokenizer tokenizer(path);
  const emergent::BpeTokenizer original(fixture_dir + "tokenizer.json");
  CHECK(tokenizer.encode("no tilde here") == original.encode("no tilde here"));
  CHECK(error_message([&] { (void)tokenizer.encode("a~b"); }) ==
        path.string() + ": model.vocab has no token for byte 126, which the input needs");
}

TEST_CASE("tokenizer: concurrent encodes share the word cache safely") {
  const emergent::BpeTokenizer tokenizer(fixture_dir + "tokenizer.json");
  std::vector<std::vector<std::int32_t>> expected;
  for (const json& c : golden()["cases"]) expected.push_back(ids_of(c["ids"]));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int repeat = 0; repeat < 5; ++repeat) {
        std::size_t i = 0;
        for (const json& c : golden()["cases"])
          wrong += tokenizer.encode(c["text"].get<std::string>()) != expected[i++];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(wrong == 0);
}
