// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (GPT-2 style; made for the
// GPT-NeoX-20B tokenizer that every Pythia model uses), encoding and decoding exactly as the
// `tokenizers` library does (checked against it by tests/golden/make_tokenizer_golden.py).
//
//   emergent::BpeTokenizer tokenizer("pythia-70m/tokenizer.json");
//   std::vector<std::int32_t> ids = tokenizer.encode("Hello world");   // {12092, 1533}
//   std::string text = tokenizer.decode(ids);                          // "Hello world"
//
// encode, in the order of `tokenizers` (AddedVocabulary::extract_and_normalize, then the
// ByteLevel pre-tokenizer, then the BPE model):
//   1. The input must be valid UTF-8 (else emergent::Error with the byte offset).
//   2. Added tokens with "normalized": false (Pythia: <|endoftext|>, <|padding|>) are split off
//      the raw text, leftmost-longest; each becomes its id and is never BPE'd. As in
//      `tokenizers`, special tokens written in the text are recognised.
//   3. Each remaining piece is normalized ("normalizer": null or NFC; Pythia: NFC).
//   4. Added tokens with "normalized": true (Pythia: runs of 2..24 spaces), matched on their
//      normalized content, are split off the normalized pieces the same way.
//   5. ByteLevel pre-tokenizer on each remaining piece: a space is prepended when
//      add_prefix_space is set and the piece does not start with one; the piece is split with
//      the GPT-2 pattern (when use_regex, the default)
//          's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      scanned by hand over the classes of io/unicode_categories.hpp; each word's UTF-8 bytes
//      are the BPE symbols (GPT-2's bytes_to_unicode names them in the vocab).
//   6. BPE: repeatedly merge the adjacent pair of lowest rank (rank = index in model.merges;
//      ties: leftmost) until no pair has a rank; with "ignore_merges" a word that is itself in
//      the vocab is taken whole. Results per word are cached (10,000 words at most).
//   7. Nothing is added around the ids (the ByteLevel post-processor only trims offsets).
// decode: ids -> token strings (added tokens -> their content) -> ByteLevel decoder: each
// token's characters map back to bytes through the inverse byte map, and a token with a
// character outside the map (e.g. the spaces of Pythia's space-run tokens) contributes its own
// UTF-8 bytes; the bytes are then read as UTF-8 with each invalid sequence replaced by U+FFFD
// (so decoding a lone piece of a multi-byte character gives U+FFFD, as in `tokenizers`).
//
// Accepted tokenizer.json (everything else is an emergent::Error naming the file and field):
//   model: "type": "BPE", "vocab" {token: id}, "merges" as "left right" strings or as
//     ["left", "right"] pairs (tokenizers >= 0.20 writes pairs), "dropout" null,
//     "continuing_subword_prefix"/"end_of_word_suffix" null or "", "byte_fallback" false,
//     "ignore_merges" either way; "unk_token" and "fuse_unk" are read but never needed: every
//     byte that valid UTF-8 can contain must have a token (a missing one is an Error at encode,
//     where `tokenizers` would silently drop it);
//   normalizer: null or NFC (Unicode 9.0 data, that of `tokenizers`: io/unicode_nfc.hpp);
//   pre_tokenizer: ByteLevel ("add_prefix_space" required, "use_regex" default true,
//     "trim_offsets" only affects offsets, which this class does not return);
//   post_processor: null or ByteLevel; decoder: ByteLevel; truncation and padding: null;
//   added_tokens: "single_word", "lstrip" and "rstrip" must be false (true for none of
//     Pythia's 25); "normalized" and "special" are honoured (special ones are dropped by
//     decode(ids, /*skip_special_tokens=*/true)).
// Token ids must be 0..N-1 without gaps (model vocab and added tokens together); vocab_size()
// is N (50277 for Pythia, whose embedding matrices are padded beyond that).
//
// encode/decode are const and thread-safe (the word cache has its own lock).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/io/unicode_categories.hpp>
#include <emergent/io/unicode_nfc.hpp>
#include <emergent/io/utf8.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace emergent {

namespace tokenizer_detail {

using Json = nlohmann::json;

// std::unordered_map<std::string, V> that can be searched with a std::string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF)
// name themselves; the other 68 bytes take U+0100, U+0101, ... in increasing byte order.
inline std::array<char32_t, 256> byte_to_character() {
  std::array<char32_t, 256> table{};
  char32_t next_extra = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
                           (byte >= 0xAE && byte <= 0xFF);
    table[byte] = printable ? char32_t(byte) : next_extra++;
  }
  return table;
}

// The classes that the GPT-2 split pattern distinguishes.
enum class CharClass : std::uint8_t { letter, number, white_space, other };

inline CharClass char_class(char32_t cp) {
  if (unicode::is_letter(cp)) return CharClass::letter;
  if (unicode::is_number(cp)) return CharClass::number;
  if (unicode::is_white_space(cp)) return CharClass::white_space;
  return CharClass::other;
}

// Calls on_word(word) for each match of the GPT-2 pattern in valid UTF-8 `text`, in order; the
// matches cover the text (every character matches one alternative).
template <class OnWord>
void split_gpt2_pattern(std::string_view text, OnWord&& on_word) {
  struct Char {
    std::size_t offset;
    char32_t code_point;
    CharClass cls;
  };
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (std::size_t offset = 0; offset < text.size();) {
    const utf8::DecodeStep step = utf8::decode_at(text, offset);
    chars.push_back({offset, step.code_point, char_class(step.code_point)});
    offset += step.length;
  }
  const std::size_t count = chars.size();
  const auto is = [&](std::size_t k, char32_t cp) {
    return k < count && chars[k].code_point == cp;
  };
  const auto run_end = [&](std::size_t k, CharClass cls) {
    while (k < count && chars[k].cls == cls) ++k;
    return k;
  };

  // Index one past the match that starts at character k.
  const auto match_end = [&](std::size_t k) -> std::size_t {
    if (is(k, U'\'')) {  // 's 't 're 've 'm 'll 'd (case-sensitive)
      if (is(k + 1, U's') || is(k + 1, U't') || is(k + 1, U'm') || is(k + 1, U'd')) return k + 2;
      if ((is(k + 1, U'r') || is(k + 1, U'v')) && is(k + 2, U'e')) return k + 3;
      if (is(k + 1, U'l') && is(k + 2, U'l')) return k + 3;
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional U+0020, then a run of one class.
    const std::size_t first = is(k, U' ') ? k + 1 : k;
    if (first < count && chars[first].cls != CharClass::white_space) {
      return run_end(first, chars[first].cls);
    }
    // `\s+(?!\S)` keeps the last white space of a run for the next word (unless the run ends the
    // text); a single white space before a non-space falls through to `\s+`.
    const std::size_t end = run_end(k, CharClass::white_space);
    if (end < count && end - k >= 2) return end - 1;
    return end;
  };

  for (std::size_t k = 0; k < count;) {
    const std::size_t end = match_end(k);
    const std::size_t begin_byte = chars[k].offset;
    const std::size_t end_byte = end < count ? chars[end].offset : text.size();
    on_word(text.substr(begin_byte, end_byte - begin_byte));
    k = end;
  }
}

// Leftmost-longest matching of a fixed set of added tokens (the semantics of the Aho-Corasick
// automaton in `tokenizers`): at the first position where some token matches, the longest one
// there wins; the scan resumes after it.
class AddedTokenMatcher {
 public:
  void add(std::string content, std::int32_t id) {
    auto& bucket = by_first_byte_[static_cast<std::uint8_t>(content.front())];
    bucket.push_back({std::move(content), id});
    std::stable_sort(bucket.begin(), bucket.end(), [](const Entry& a, const Entry& b) {
      return a.content.size() > b.content.size();
    });
  }

  // Calls on_piece(text_piece, std::optional<id>) for the pieces of `text` in order: matched
  // tokens with their id, the (non-empty) text between them with std::nullopt.
  template <class OnPiece>
  void split(std::string_view text, OnPiece&& on_piece) const {
    std::size_t piece_begin = 0;
    for (std::size_t pos = 0; pos < text.size();) {
      const Entry* match = nullptr;
      for (const Entry& entry : by_first_byte_[static_cast<std::uint8_t>(text[pos])]) {
        if (text.substr(pos).starts_with(entry.content)) {
          match = &entry;
          break;
        }
      }
      if (!match) {
        ++pos;
        continue;
      }
      if (piece_begin < pos) on_piece(text.substr(piece_begin, pos - piece_begin), std::nullopt);
      on_piece(text.substr(pos, match->content.size()), std::optional<std::int32_t>(match->id));
      pos += match->content.size();
      piece_begin = pos;
    }
    if (piece_begin < text.size()) on_piece(text.substr(piece_begin), std::nullopt);
  }

 private:
  struct Entry {
    std::string content;
    std::int32_t id;
  };
  std::array<std::vector<Entry>, 256> by_first_byte_;  // each bucket longest first
};

struct Merge {
  std::int32_t rank;       // index in model.merges: lower merges first
  std::int32_t merged_id;  // id of left + right
};

constexpr std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
}

// splitmix64 finalizer: the two ids of a pair spread over all bits of the hash.
struct PairHash {
  std::size_t operator()(std::uint64_t key) const {
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return static_cast<std::size_t>(key);
  }
};

// Words already encoded; bounded, never evicts (like the cache of `tokenizers`).
class WordCache {
 public:
  static constexpr std::size_t capacity = 10000;

  bool append_if_cached(std::string_view word, std::vector<std::int32_t>& out) const {
    std::lock_guard lock(mutex_);
    const auto hit = ids_of_word_.find(word);
    if (hit == ids_of_word_.end()) return false;
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return true;
  }

  void insert(std::string_view word, std::span<const std::int32_t> ids) {
    std::lock_guard lock(mutex_);
    if (ids_of_word_.size() < capacity) {
      ids_of_word_.try_emplace(std::string(word), ids.begin(), ids.end());
    }
  }

 private:
  mutable std::mutex mutex_;
  StringMap<std::vector<std::int32_t>> ids_of_word_;
};

}  // namespace tokenizer_detail

class BpeTokenizer {
 public:
  // Reads and checks a tokenizer.json; throws emergent::Error naming the file and the field.
  explicit BpeTokenizer(const std::filesystem::path& tokenizer_json)
      : file_(tokenizer_json.string()), cache_(std::make_unique<tokenizer_detail::WordCache>()) {
    load(parse_file(tokenizer_json));
  }

  // Token ids of UTF-8 `text` (see the header comment for the pipeline).
  std::vector<std::int32_t> encode(std::string_view text) const {
    if (const auto bad = utf8::first_invalid_byte(text)) {
      std::ostringstream what;
      what << "invalid UTF-8 at byte " << *bad << " (0x" << std::hex << std::uppercase
           << unsigned(static_cast<std::uint8_t>(text[*bad])) << ")";
      throw Error("BpeTokenizer::encode: " + what.str());
    }
    std::vector<std::int32_t> ids;
    raw_added_tokens_.split(text, [&](std::string_view piece, std::optional<std::int32_t> added) {
      if (added) {
        ids.push_back(*added);
        return;
      }
      const std::string normalized = nfc_ ? unicode::nfc_utf8(piece) : std::string(piece);
      normalized_added_tokens_.split(
          normalized, [&](std::string_view sub_piece, std::optional<std::int32_t> sub_added) {
            if (sub_added) {
              ids.push_back(*sub_added);
            } else {
              encode_pre_tokenized(sub_piece, ids);
            }
          });
    });
    return ids;
  }

  // Text of `ids` (ByteLevel decoder, invalid UTF-8 replaced by U+FFFD). Throws for an id that
  // is not in the vocabulary.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const {
    std::string bytes;
    for (const std::int32_t id : ids) {
      check_id(id, "decode");
      const auto index = static_cast<std::size_t>(id);
      if (skip_special_tokens && is_special_[index]) continue;
      bytes += bytes_of_id_[index];
    }
    return utf8::to_valid_utf8(bytes);
  }

  // Id of a token string as the vocab spells it (byte-level alphabet, e.g. "Ġthe"), or of an
  // added token's content; std::nullopt if there is none.
  std::optional<std::int32_t> token_to_id(std::string_view token) const {
    if (const auto added = added_ids_.find(token); added != added_ids_.end()) return added->second;
    if (const auto model = model_ids_.find(token); model != model_ids_.end()) return model->second;
    return std::nullopt;
  }

  // Token string of an id (throws for an id outside 0..vocab_size()-1).
  const std::string& id_to_token(std::int32_t id) const {
    check_id(id, "id_to_token");
    return token_of_id_[static_cast<std::size_t>(id)];
  }

  // Whether an id is a special added token (Pythia: 0 <|endoftext|> and 1 <|padding|>).
  bool is_special(std::int32_t id) const {
    return id >= 0 && id < vocab_size() && is_special_[static_cast<std::size_t>(id)];
  }

  // Number of ids: model vocab and added tokens together (HF get_vocab_size(true)).
  std::int32_t vocab_size() const { return static_cast<std::int32_t>(token_of_id_.size()); }

 private:
  using Json = tokenizer_detail::Json;

  std::string file_;
  std::vector<std::string> token_of_id_;
  std::vector<std::string> bytes_of_id_;  // what decode emits for the id
  std::vector<bool> is_special_;
  tokenizer_detail::StringMap<std::int32_t> model_ids_;
  tokenizer_detail::StringMap<std::int32_t> added_ids_;
  std::array<std::int32_t, 256> id_of_byte_{};  // -1 where the vocab has no token for the byte
  std::unordered_map<std::uint64_t, tokenizer_detail::Merge, tokenizer_detail::PairHash> merges_;
  tokenizer_detail::AddedTokenMatcher raw_added_tokens_;
  tokenizer_detail::AddedTokenMatcher normalized_added_tokens_;
  bool nfc_ = false;
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  bool ignore_merges_ = false;
  std::unique_ptr<tokenizer_detail::WordCache> cache_;

  void check_id(std::int32_t id, const char* operation) const {
    if (id < 0 || id >= vocab_size()) {
      throw Error(file_ + ": " + operation + ": id " + std::to_string(id) + " is not in 0.." +
                  std::to_string(vocab_size() - 1));
    }
  }

  // --- encode ---------------------------------------------------------------------------------

  void encode_pre_tokenized(std::string_view piece, std::vector<std::int32_t>& ids) const {
    std::string prefixed;
    if (add_prefix_space_ && !piece.starts_with(' ')) {
      prefixed = " " + std::string(piece);
      piece = prefixed;
    }
    if (use_regex_) {
      tokenizer_detail::split_gpt2_pattern(piece,
                                           [&](std::string_view word) { encode_word(word, ids); });
    } else {
      encode_word(piece, ids);
    }
  }

  void encode_word(std::string_view word, std::vector<std::int32_t>& ids) const {
    if (cache_->append_if_cached(word, ids)) return;
    const std::size_t first_new = ids.size();
    if (const auto whole = ignore_merges_ ? whole_word_id(word) : std::nullopt) {
      ids.push_back(*whole);
    } else {
      merge_bytes(word, ids);
    }
    cache_->insert(word, std::span(ids).subspan(first_new));
  }

  std::optional<std::int32_t> whole_word_id(std::string_view word) const {
    static const auto character_of_byte = tokenizer_detail::byte_to_character();
    std::string mapped;
    for (const char byte : word)
      utf8::append(mapped, character_of_byte[static_cast<std::uint8_t>(byte)]);
    const auto found = model_ids_.find(mapped);
    return found == model_ids_.end() ? std::nullopt : std::optional(found->second);
  }

  // BPE of one word, as `tokenizers` does it: a queue of candidate merges ordered by (rank,
  // position); a candidate whose pair has changed since it was queued is skipped.
  void merge_bytes(std::string_view word, std::vector<std::int32_t>& ids) const {
    struct Symbol {
      std::int32_t id;
      std::int32_t prev;  // -1: none
      std::int32_t next;  // -1: none
      bool merged_away;
    };
    struct Candidate {
      std::int32_t rank;
      std::int32_t position;
      std::int32_t merged_id;
      bool operator>(const Candidate& other) const {
        return rank != other.rank ? rank > other.rank : position > other.position;
      }
    };
    const auto count = static_cast<std::int32_t>(word.size());
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    for (std::int32_t i = 0; i < count; ++i) {
      const auto byte = static_cast<std::uint8_t>(word[static_cast<std::size_t>(i)]);
      if (id_of_byte_[byte] < 0) {
        throw Error(file_ + ": model.vocab has no token for byte " + std::to_string(byte) +
                    ", which the input needs");
      }
      symbols.push_back({id_of_byte_[byte], i - 1, i + 1 < count ? i + 1 : -1, false});
    }
    const auto find_merge = [&](std::int32_t left,
                                std::int32_t right) -> const tokenizer_detail::Merge* {
      const auto found = merges_.find(tokenizer_detail::pair_key(left, right));
      return found == merges_.end() ? nullptr : &found->second;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    const auto push_candidate = [&](std::int32_t position) {
      const Symbol& left = symbols[static_cast<std::size_t>(position)];
      if (left.next < 0) return;
      if (const auto* merge =
              find_merge(left.id, symbols[static_cast<std::size_t>(left.next)].id)) {
        queue.push({merge->rank, position, merge->merged_id});
      }
    };
    for (std::int32_t i = 0; i + 1 < count; ++i) push_candidate(i);

    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[static_cast<std::size_t>(top.position)];
      if (left.merged_away || left.next < 0) continue;
      Symbol& right = symbols[static_cast<std::size_t>(left.next)];
      const auto* current = find_merge(left.id, right.id);
      if (!current || current->merged_id != top.merged_id) continue;
      left.id = top.merged_id;
      right.merged_away = true;
      left.next = right.next;
      if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.position;
      if (left.prev >= 0) push_candidate(left.prev);
      push_candidate(top.position);
    }
    for (std::int32_t i = count > 0 ? 0 : -1; i >= 0;
         i = symbols[static_cast<std::size_t>(i)].next) {
      ids.push_back(symbols[static_cast<std::size_t>(i)].id);
    }
  }

  // --- loading --------------------------------------------------------------------------------

  Json parse_file(const std::filesystem::path& path) const {
    std::ifstream in(path, std::ios::binary);
    require(in.good(), file_, "cannot open file");
    std::ostringstream text;
    text << in.rdbuf();
    try {
      return Json::parse(text.str());
    } catch (const Json::exception& e) {
      throw Error(file_ + ": invalid JSON: " + e.what());
    }
  }

  std::string where(const std::string& field) const { return file_ + ": " + field; }

  const Json& member(const Json& object, const std::string& object_path, const char* key) const {
    const std::string path = object_path.empty() ? key : object_path + "." + key;
    require(object.is_object() && object.contains(key), where(path), "missing");
    return object.at(key);
  }

  // True when `key` is absent or null.
  static bool absent(const Json& object, const char* key) {
    return !object.contains(key) || object.at(key).is_null();
  }

  bool bool_member(const Json& object, const std::string& object_path, const char* key,
                   bool default_value) const {
    if (absent(object, key)) return default_value;
    const Json& value = object.at(key);
    require(value.is_boolean(), where(object_path + "." + key), "expected true or false");
    return value.get<bool>();
  }

  const std::string& string_value(const Json& value, const std::string& path) const {
    require(value.is_string(), where(path), "expected a string");
    return value.get_ref<const std::string&>();
  }

  std::int32_t id_value(const Json& value, const std::string& path) const {
    require(value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                value.get<std::int64_t>() <= std::numeric_limits<std::int32_t>::max(),
            where(path), "expected a token id (integer in 0..2^31-1), got " + value.dump());
    return static_cast<std::int32_t>(value.get<std::int64_t>());
  }

  // Requires object[key].type to be one of `supported` (or the member to be null/absent when
  // `may_be_null`); returns the type ("" when null).
  std::string component_type(const Json& root, const char* key,
                             std::initializer_list<const char*> supported, bool may_be_null) const {
    std::string list;
    for (const char* name : supported) list += (list.empty() ? "" : ", ") + std::string(name);
    if (absent(root, key)) {
      require(may_be_null, where(key), "missing (supported: " + list + ")");
      return "";
    }
    const std::string type =
        string_value(member(root.at(key), key, "type"), std::string(key) + ".type");
    bool known = false;
    for (const char* name : supported) known = known || type == name;
    require(known, where(std::string(key) + ".type"),
            "'" + type + "' is not supported (supported: " + list +
                (may_be_null ? ", or null" : "") + ")");
    return type;
  }

  void load(const Json& root) {
    require(root.is_object(), file_, "expected a JSON object at the top level");
    for (const char* key : {"truncation", "padding"}) {
      require(absent(root, key), where(key), "only null is supported");
    }
    nfc_ = component_type(root, "normalizer", {"NFC"}, true) == "NFC";
    component_type(root, "post_processor", {"ByteLevel"}, true);
    component_type(root, "decoder", {"ByteLevel"}, false);
    component_type(root, "pre_tokenizer", {"ByteLevel"}, false);
    const Json& pre_tokenizer = root.at("pre_tokenizer");
    const Json& add_prefix_space = member(pre_tokenizer, "pre_tokenizer", "add_prefix_space");
    require(add_prefix_space.is_boolean(), where("pre_tokenizer.add_prefix_space"),
            "expected true or false");
    add_prefix_space_ = add_prefix_space.get<bool>();
    use_regex_ = bool_member(pre_tokenizer, "pre_tokenizer", "use_regex", true);

    const Json& model = member(root, "", "model");
    load_model(model);
    build_id_tables(load_added_tokens(root));
  }

  void load_model(const Json& model) {
    const std::string type = string_value(member(model, "model", "type"), "model.type");
    require(type == "BPE", where("model.type"), "'" + type + "' is not supported (only BPE)");
    require(absent(model, "dropout"), where("model.dropout"), "only null is supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      require(absent(model, key) || model.at(key) == "", where(std::string("model.") + key),
              "only null or \"\" is supported");
    }
    require(!bool_member(model, "model", "byte_fallback", false), where("model.byte_fallback"),
            "only false is supported");
    ignore_merges_ = bool_member(model, "model", "ignore_merges", false);

    const Json& vocab = member(model, "model", "vocab");
    require(vocab.is_object(), where("model.vocab"), "expected an object {token: id}");
    model_ids_.reserve(vocab.size());
    for (const auto& [token, id_json] : vocab.items()) {
      model_ids_.emplace(token, id_value(id_json, "model.vocab[\"" + token + "\"]"));
    }

    const Json& merges = member(model, "model", "merges");
    require(merges.is_array(), where("model.merges"), "expected an array");
    merges_.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string path = "model.merges[" + std::to_string(rank) + "]";
      const Json& entry = merges[rank];
      std::string left, right;
      if (entry.is_string()) {
        const std::string& text = entry.get_ref<const std::string&>();
        const auto space = text.find(' ');
        require(space != std::string::npos && text.find(' ', space + 1) == std::string::npos,
                where(path),
                "expected \"left right\" (two tokens and one space), got " + entry.dump());
        left = text.substr(0, space);
        right = text.substr(space + 1);
      } else {
        require(
            entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string(),
            where(path), "expected \"left right\" or [\"left\", \"right\"], got " + entry.dump());
        left = entry[0].get<std::string>();
        right = entry[1].get<std::string>();
      }
      const auto model_id = [&](const std::string& token) {
        const auto found = model_ids_.find(token);
        require(found != model_ids_.end(), where(path),
                "token \"" + token + "\" is not in model.vocab");
        return found->second;
      };
      const std::int32_t left_id = model_id(left), right_id = model_id(right);
      const std::int32_t merged_id = model_id(left + right);
      // A later duplicate of a pair replaces the earlier one, as in `tokenizers`.
      merges_[tokenizer_detail::pair_key(left_id, right_id)] =
          tokenizer_detail::Merge{static_cast<std::int32_t>(rank), merged_id};
    }
  }

  // Returns the ids of the special added tokens.
  std::vector<std::int32_t> load_added_tokens(const Json& root) {
    std::vector<std::int32_t> special_ids;
    if (absent(root, "added_tokens")) return special_ids;
    const Json& added = root.at("added_tokens");
    require(added.is_array(), where("added_tokens"), "expected an array");
    for (std::size_t i = 0; i < added.size(); ++i) {
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      const Json& entry = added[i];
      require(entry.is_object(), where(path), "expected an object");
      const std::int32_t id = id_value(member(entry, path, "id"), path + ".id");
      const std::string& content = string_value(member(entry, path, "content"), path + ".content");
      require(!content.empty(), where(path + ".content"), "empty");
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        require(!bool_member(entry, path, flag, false), where(path + "." + flag),
                "true is not supported (only false)");
      }
      const bool special = bool_member(entry, path, "special", false);
      const bool normalized = bool_member(entry, path, "normalized", !special);

      if (const auto model = model_ids_.find(content); model != model_ids_.end()) {
        require(model->second == id, where(path + ".id"),
                std::to_string(id) + " but model.vocab gives \"" + content + "\" id " +
                    std::to_string(model->second));
      }
      require(added_ids_.emplace(content, id).second, where(path + ".content"),
              "\"" + content + "\" is added twice");
      if (special) special_ids.push_back(id);
      if (normalized) {
        normalized_added_tokens_.add(nfc_ ? unicode::nfc_utf8(content) : content, id);
      } else {
        raw_added_tokens_.add(content, id);
      }
    }
    return special_ids;
  }

  // id -> token, id -> decoded bytes, special flags, byte -> id; checks that the ids of the
  // model vocab and the added tokens together are 0..N-1, each naming one token.
  void build_id_tables(const std::vector<std::int32_t>& special_ids) {
    std::size_t count = model_ids_.size();
    for (const auto& [content, id] : added_ids_) count += model_ids_.contains(content) ? 0 : 1;
    token_of_id_.assign(count, std::string());
    std::vector<bool> seen(count, false);
    const auto place = [&](const std::string& token, std::int32_t id, const std::string& field) {
      const auto index = static_cast<std::size_t>(id);
      require(index < count, where(field),
              "id " + std::to_string(id) + " for \"" + token + "\": ids must be 0.." +
                  std::to_string(count - 1) + " (one per token, no gaps)");
      require(!seen[index] || token_of_id_[index] == token, where(field),
              "id " + std::to_string(id) + " names both \"" + token_of_id_[index] + "\" and \"" +
                  token + "\"");
      seen[index] = true;
      token_of_id_[index] = token;
    };
    for (const auto& [token, id] : model_ids_) place(token, id, "model.vocab");
    for (const auto& [token, id] : added_ids_) place(token, id, "added_tokens");

    is_special_.assign(count, false);
    for (const std::int32_t id : special_ids) is_special_[static_cast<std::size_t>(id)] = true;

    const auto character_of_byte = tokenizer_detail::byte_to_character();
    std::unordered_map<char32_t, char> byte_of_character;
    for (unsigned byte = 0; byte < 256; ++byte) {
      byte_of_character.emplace(character_of_byte[byte], static_cast<char>(byte));
      std::string character;
      utf8::append(character, character_of_byte[byte]);
      const auto found = model_ids_.find(character);
      id_of_byte_[byte] = found == model_ids_.end() ? -1 : found->second;
    }
    bytes_of_id_.assign(count, std::string());
    for (std::size_t id = 0; id < count; ++id) {
      const std::string& token = token_of_id_[id];
      std::string bytes;
      bool all_mapped = true;
      for (std::size_t offset = 0; offset < token.size() && all_mapped;) {
        const utf8::DecodeStep step = utf8::decode_at(token, offset);
        const auto found = byte_of_character.find(step.code_point);
        all_mapped = found != byte_of_character.end();
        if (all_mapped) bytes.push_back(found->second);
        offset += step.length;
      }
      bytes_of_id_[id] = all_mapped ? std::move(bytes) : token;
    }
  }
};

}  // namespace emergent
