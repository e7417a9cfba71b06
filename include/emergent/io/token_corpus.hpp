// A token corpus for language-model training, as scripts/make_corpus.py writes it:
//
//   corpus/train.tokens     uint16 little-endian token ids, each document after <|endoftext|>
//   corpus/tokenizer.json   the byte-level BPE that made them
//   corpus/corpus.json      the manifest: vocab_size, sha256 of train.tokens, sources, sizes
//
// read_token_corpus checks what training trusts: the manifest's hash against the tokens, every
// id below vocab_size, the tokenizer readable and its ids within vocab_size (a model whose
// vocabulary is smaller than its tokenizer's could not embed what `emergent pythia` encodes),
// and enough tokens for a sequence; errors name the file and field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/sha256.hpp>
#include <emergent/io/tokenizer.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

struct TokenCorpus {
  std::filesystem::path folder;
  std::vector<std::int32_t> tokens;
  int vocab_size = 0;
  std::string sha256;  // of train.tokens
  nlohmann::json manifest;
};

inline TokenCorpus read_token_corpus(const std::filesystem::path& folder) {
  TokenCorpus corpus;
  corpus.folder = folder;
  const std::filesystem::path manifest = folder / "corpus.json", tokens = folder / "train.tokens";
  require(std::filesystem::is_directory(folder), folder.string(),
          "is not a corpus folder (make one with scripts/make_corpus.py)");
  for (const auto& file : {manifest, tokens, folder / "tokenizer.json"})
    require(std::filesystem::exists(file), file.string(),
            "is missing (the corpus folder is incomplete; rebuild it with scripts/make_corpus.py)");
  corpus.manifest = read_json_file(manifest);
  const auto field = [&](const char* name) -> const nlohmann::json& {
    require(corpus.manifest.contains(name), manifest.string(),
            std::string("field '") + name + "' is missing");
    return corpus.manifest.at(name);
  };
  require(field("vocab_size").is_number_integer() && field("vocab_size").get<int>() >= 2 &&
              field("vocab_size").get<int>() <= 65536,
          manifest.string(), "field 'vocab_size' must be an integer in [2, 65536]");
  corpus.vocab_size = field("vocab_size").get<int>();
  require(field("train_tokens_sha256").is_string(), manifest.string(),
          "field 'train_tokens_sha256' must be a string");
  const BpeTokenizer tokenizer(folder / "tokenizer.json");
  require(tokenizer.vocab_size() <= corpus.vocab_size, manifest.string(),
          "field 'vocab_size' = " + std::to_string(corpus.vocab_size) +
              " is smaller than the tokenizer's " + std::to_string(tokenizer.vocab_size()) +
              " ids (" + (folder / "tokenizer.json").string() +
              "): the corpus and its tokenizer disagree; rebuild it with scripts/make_corpus.py");
  std::ifstream in(tokens, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  require(bytes.size() % 2 == 0, tokens.string(), "has an odd byte count (uint16 ids expected)");
  corpus.sha256 = sha256_hex(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()));
  require(corpus.sha256 == field("train_tokens_sha256").get<std::string>(), tokens.string(),
          "does not match corpus.json's train_tokens_sha256 (a changed or damaged file)");
  corpus.tokens.resize(bytes.size() / 2);
  for (std::size_t i = 0; i < corpus.tokens.size(); ++i) {
    const auto lo = static_cast<unsigned char>(bytes[2 * i]),
               hi = static_cast<unsigned char>(bytes[2 * i + 1]);
    corpus.tokens[i] = static_cast<std::int32_t>(lo | (hi << 8));
    require(corpus.tokens[i] < corpus.vocab_size, tokens.string(),
            "token " + std::to_string(i) + " is id " + std::to_string(corpus.tokens[i]) +
                ", not below corpus.json's vocab_size " + std::to_string(corpus.vocab_size));
  }
  return corpus;
}

}  // namespace emergent
