// safetensors: a memory-mapped reader that validates every byte it trusts, and an atomic writer.
//
// Format (github.com/huggingface/safetensors): 8 bytes N (u64 little-endian), N bytes of UTF-8
// JSON object {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the data section; offsets are relative to its start,
// end exclusive, row-major little-endian, no strides.
//
//   emergent::SafetensorsFile f("model.safetensors");   // throws emergent::Error on bad input
//   std::vector<float> w = f.read_f32("embed.weight");    // F32/F16/BF16/F64 -> fp32
//   f.read_f32_into("embed.weight", dst, {vocab, d_model}); // checks the shape first
//   emergent::write_safetensors("step_000100.safetensors", {{"embed.weight", {2, 4}, span}});
//
// Every error is an emergent::Error whose message starts with the file path and names the tensor
// and field at fault. The reader accepts gaps between tensors (the reference parser does not)
// but never overlaps, out-of-bounds offsets or size mismatches. The mapping is private and
// read-only; as with any mmap, truncating the file while it is open is undefined (SIGBUS).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <emergent/core/error.hpp>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace emergent {

static_assert(std::endian::native == std::endian::little,
              "emergent's safetensors reader/writer assumes a little-endian host");

// ---------------------------------------------------------------------------------------------
// fp16 / bf16 <-> fp32
// ---------------------------------------------------------------------------------------------

// IEEE binary16 -> binary32, exact: subnormals, signed zeros, infinities and NaN payloads kept.
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {                  // subnormal: normalise
      std::uint32_t e = 113;  // 127 - 15 + 1
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
      }
      bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// binary32 -> binary16 rounding to nearest, ties to even; overflow gives +-inf, NaN stays a
// (quiet) NaN with the top payload bits kept.
inline std::uint16_t f32_to_f16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (u < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    const std::uint32_t e = u >> 23;
    const std::uint32_t shift = 126u - e;  // >= 14
    if (shift > 24) return sign;           // < 2^-25 (and 2^-25 exactly ties to even 0)
    const std::uint32_t m = (u & 0x7fffffu) | 0x800000u;
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t h = (u >> 13) - (112u << 10);
  const std::uint32_t rem = u & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

// bfloat16 -> fp32 is exact: the 16 bits are the high half of the fp32 word.
inline float bf16_to_f32(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// fp32 -> bfloat16 rounding to nearest, ties to even; NaN stays a quiet NaN.
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline std::vector<float> f16_to_f32(std::span<const std::uint16_t> src) {
  std::vector<float> out(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) out[i] = f16_to_f32(src[i]);
  return out;
}

inline std::vector<float> bf16_to_f32(std::span<const std::uint16_t> src) {
  std::vector<float> out(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) out[i] = bf16_to_f32(src[i]);
  return out;
}

inline std::vector<std::uint16_t> f32_to_f16(std::span<const float> src) {
  std::vector<std::uint16_t> out(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) out[i] = f32_to_f16(src[i]);
  return out;
}

inline std::vector<std::uint16_t> f32_to_bf16(std::span<const float> src) {
  std::vector<std::uint16_t> out(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) out[i] = f32_to_bf16(src[i]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

// An Error naming `file` and `tensor` if a value read from it is not finite: no loader trusts a
// NaN or an infinity in weights (`why` says what that means for the caller's files).
inline void require_finite_values(std::span<const float> values, const std::string& file,
                                  std::string_view tensor, const std::string& why) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad != values.end())
    throw Error(file + ": tensor '" + std::string(tensor) + "' holds a non-finite value (" +
                std::to_string(*bad) + " at index " + std::to_string(bad - values.begin()) +
                "): " + why);
}

namespace safetensors_detail {

inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference parser
inline constexpr int kMaxJsonDepth = 32;                       // a valid header needs 3

// Bytes per element of a supported dtype, 0 for anything else.
inline std::size_t dtype_size(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "U8" || dtype == "I8" || dtype == "BOOL") return 1;
  return 0;
}

inline std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Printable, bounded rendering of a name taken from an untrusted file.
inline std::string quoted(std::string_view name) {
  std::string s = "'";
  const std::size_t limit = 200;
  for (std::size_t i = 0; i < name.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      s += "\\x";
      s += hex[c >> 4];
      s += hex[c & 15];
    } else {
      s += static_cast<char>(c);
    }
  }
  if (name.size() > limit) s += "...";
  return s + "'";
}

inline std::string errno_string(int err) { return std::string(std::strerror(err)); }

// Rejects nesting deeper than kMaxJsonDepth before handing the bytes to the JSON parser, so a
// hostile header like "[[[[..." cannot make it build millions of nested values.
inline bool json_depth_ok(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

// Reads a JSON integer in [0, max] into `out`; false for anything else (float, negative, string).
inline bool json_to_u64(const nlohmann::json& j, std::uint64_t max, std::uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<std::uint64_t>();
  } else if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (v < 0) return false;
    out = static_cast<std::uint64_t>(v);
  } else {
    return false;
  }
  return out <= max;
}

// Parses untrusted JSON text for the io readers (safetensors headers, index files, config.json).
// Stricter than nlohmann's defaults: nesting deeper than kMaxJsonDepth, a NUL byte and a key
// repeated within one object are errors (nlohmann would recurse without bound, stop at the NUL,
// and keep the last duplicate). Errors read "<where>: <what> ...", e.g. "<file>: header is not
// valid JSON: ...".
inline nlohmann::json parse_json_strict(std::string_view text, const std::string& where,
                                        const std::string& what) {
  using nlohmann::json;
  if (!json_depth_ok(text)) {
    throw Error(where + ": " + what + " JSON is nested deeper than " +
                std::to_string(kMaxJsonDepth) + " levels");
  }
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw Error(where + ": " + what + " is not valid JSON: NUL byte at offset " +
                std::to_string(nul));
  }
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  bool has_duplicate = false;
  const json::parser_callback_t callback = [&](int, json::parse_event_t event, json& value) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && value.is_string()) {
          const auto& k = value.get_ref<const std::string&>();
          if (!open_objects.back().insert(k).second && !has_duplicate) {
            has_duplicate = true;
            duplicate = k;
          }
        }
        break;
      default:
        break;
    }
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    throw Error(where + ": " + what + " is not valid JSON: " + e.what());
  }
  if (has_duplicate)
    throw Error(where + ": duplicate key " + safetensors_detail::quoted(duplicate) + " in " + what);
  return parsed;
}

}  // namespace safetensors_detail

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------

struct TensorInfo {
  std::string name;
  std::string dtype;                 // F32, F16, BF16, F64, I32, I64, U8, I8 or BOOL
  std::vector<std::int64_t> shape;   // row-major; [] is a scalar
  std::size_t numel = 0;             // product of shape (1 for a scalar)
  std::span<const std::byte> bytes;  // into the mapping: valid while the file object lives
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path) : path_(path), where_(path.string()) {
    map_file();
    try {
      parse();
    } catch (...) {
      unmap();
      throw;
    }
  }

  ~SafetensorsFile() { unmap(); }

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Moving keeps the mapping at the same address, so TensorInfo::bytes spans stay valid.
  SafetensorsFile(SafetensorsFile&& other) noexcept
      : path_(std::move(other.path_)),
        where_(std::move(other.where_)),
        map_(std::exchange(other.map_, nullptr)),
        map_size_(std::exchange(other.map_size_, 0)),
        tensors_(std::move(other.tensors_)),
        index_(std::move(other.index_)),
        metadata_(std::move(other.metadata_)) {}

  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept {
    if (this != &other) {
      unmap();
      path_ = std::move(other.path_);
      where_ = std::move(other.where_);
      map_ = std::exchange(other.map_, nullptr);
      map_size_ = std::exchange(other.map_size_, 0);
      tensors_ = std::move(other.tensors_);
      index_ = std::move(other.index_);
      metadata_ = std::move(other.metadata_);
    }
    return *this;
  }

  const std::filesystem::path& path() const { return path_; }

  // Every byte of the file (header included), from the mapping: for content hashes.
  std::span<const std::byte> file_bytes() const { return {map_, map_size_}; }

  // Tensor names ordered by their position in the data section.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (const auto& t : tensors_) out.push_back(t.name);
    return out;
  }

  // All tensors, ordered by their position in the data section.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  std::size_t size() const { return tensors_.size(); }

  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }

  const TensorInfo& info(std::string_view name) const {
    const auto it = index_.find(name);
    if (it == index_.end()) {
      throw Error(where_ + ": no tensor named " + safetensors_detail::quoted(name) +
                  " (the file has " + std::to_string(tensors_.size()) + " tensors)");
    }
    return tensors_[it->second];
  }

  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor converted to fp32 (F32, F16, BF16 or F64 in the file).
  std::vector<float> read_f32(std::string_view name) const {
    const TensorInfo& t = info(name);
    std::vector<float> out(t.numel);
    convert(t, out.data());
    return out;
  }

  // Converts the tensor into `dst` after checking that its shape is `expected_shape` and that
  // dst holds exactly its element count.
  void read_f32_into(std::string_view name, std::span<float> dst,
                     const std::vector<std::int64_t>& expected_shape) const {
    const TensorInfo& t = info(name);
    if (t.shape != expected_shape) {
      throw Error(where_ + ": tensor " + safetensors_detail::quoted(t.name) + ": shape " +
                  safetensors_detail::shape_string(t.shape) + " in the file, expected " +
                  safetensors_detail::shape_string(expected_shape));
    }
    if (dst.size() != t.numel) {
      throw Error(where_ + ": tensor " + safetensors_detail::quoted(t.name) +
                  ": destination holds " + std::to_string(dst.size()) +
                  " floats, tensor of shape " + safetensors_detail::shape_string(t.shape) +
                  " has " + std::to_string(t.numel));
    }
    convert(t, dst.data());
  }

 private:
  void map_file() {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(where_ + ": cannot open: " + safetensors_detail::errno_string(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw Error(where_ + ": cannot stat: " + safetensors_detail::errno_string(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw Error(where_ + ": not a regular file");
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size < 8) {
      ::close(fd);
      throw Error(where_ + ": truncated: file is " + std::to_string(size) +
                  " bytes, smaller than the 8-byte header length");
    }
    void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);  // the mapping stays valid
    if (p == MAP_FAILED)
      throw Error(where_ + ": cannot mmap: " + safetensors_detail::errno_string(err));
    map_ = static_cast<const std::byte*>(p);
    map_size_ = static_cast<std::size_t>(size);
  }

  void unmap() noexcept {
    if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_size_);
    map_ = nullptr;
    map_size_ = 0;
  }

  void parse() {
    namespace d = safetensors_detail;
    using nlohmann::json;
    std::uint64_t n = 0;
    std::memcpy(&n, map_, 8);
    const std::uint64_t available = map_size_ - 8;
    // A length past the end without the '{' that opens every safetensors header: another kind of
    // file (a config.json, a text file), whose first 8 bytes read as a meaningless length.
    if (n > available && available > 0 && static_cast<char>(map_[8]) != '{') {
      throw Error(where_ + ": is not a safetensors file (it does not start with an 8-byte header " +
                  "length and a JSON header)");
    }
    if (n > available) {
      throw Error(where_ + ": truncated header: header length " + std::to_string(n) +
                  " exceeds the " + std::to_string(available) + " bytes after the length field");
    }
    if (n > d::kMaxHeaderBytes) {
      throw Error(where_ + ": header length " + std::to_string(n) + " exceeds the limit of " +
                  std::to_string(d::kMaxHeaderBytes) + " bytes");
    }
    const std::string_view text(reinterpret_cast<const char*>(map_ + 8),
                                static_cast<std::size_t>(n));
    const std::byte* data = map_ + 8 + n;
    const std::uint64_t data_size = available - n;

    const json header = d::parse_json_strict(text, where_, "header");
    if (!header.is_object()) {
      throw Error(where_ + ": header is not a JSON object (it is " +
                  std::string(header.type_name()) + ")");
    }

    struct Range {
      std::uint64_t begin, end;
      std::size_t slot;
    };
    std::vector<Range> ranges;
    std::vector<TensorInfo> parsed;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) throw Error(where_ + ": __metadata__ is not a JSON object");
        for (const auto& [k, v] : entry.items()) {
          if (!v.is_string()) {
            throw Error(where_ + ": __metadata__: value of " + d::quoted(k) + " is not a string");
          }
          metadata_.emplace(k, v.get<std::string>());
        }
        continue;
      }
      const std::string at = where_ + ": tensor " + d::quoted(name);
      if (!entry.is_object()) throw Error(at + ": entry is not a JSON object");
      TensorInfo t;
      t.name = name;

      const auto dt = entry.find("dtype");
      if (dt == entry.end()) throw Error(at + ": missing field 'dtype'");
      if (!dt->is_string()) throw Error(at + ": field 'dtype' is not a string");
      t.dtype = dt->get<std::string>();
      const std::size_t esize = d::dtype_size(t.dtype);
      if (esize == 0) {
        throw Error(at + ": dtype " + d::quoted(t.dtype) +
                    " is not supported (F32, F16, BF16, F64, I32, I64, U8, I8, BOOL)");
      }

      const auto sh = entry.find("shape");
      if (sh == entry.end()) throw Error(at + ": missing field 'shape'");
      if (!sh->is_array()) throw Error(at + ": field 'shape' is not an array");
      std::uint64_t numel = 1;
      bool overflow = false;
      for (std::size_t i = 0; i < sh->size(); ++i) {
        std::uint64_t dim = 0;
        if (!d::json_to_u64((*sh)[i],
                            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                            dim)) {
          throw Error(at + ": shape[" + std::to_string(i) + "] = " + (*sh)[i].dump() +
                      " is not a non-negative 64-bit integer");
        }
        t.shape.push_back(static_cast<std::int64_t>(dim));
        if (dim != 0 && numel > std::numeric_limits<std::uint64_t>::max() / dim) overflow = true;
        numel *= dim;  // wraps only when overflow is set; checked below
      }
      // Zero in any dimension makes the product zero regardless of earlier overflow.
      if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) {
        numel = 0;
        overflow = false;
      }
      if (overflow || numel > std::numeric_limits<std::uint64_t>::max() / esize ||
          numel > std::numeric_limits<std::size_t>::max()) {
        throw Error(at + ": shape " + d::shape_string(t.shape) +
                    " overflows: element count too large");
      }
      t.numel = static_cast<std::size_t>(numel);
      const std::uint64_t nbytes = numel * esize;

      const auto off = entry.find("data_offsets");
      if (off == entry.end()) throw Error(at + ": missing field 'data_offsets'");
      if (!off->is_array() || off->size() != 2) {
        throw Error(at + ": field 'data_offsets' is not an array [begin, end]");
      }
      std::uint64_t begin = 0, end = 0;
      if (!d::json_to_u64((*off)[0], std::numeric_limits<std::uint64_t>::max(), begin) ||
          !d::json_to_u64((*off)[1], std::numeric_limits<std::uint64_t>::max(), end)) {
        throw Error(at + ": data_offsets " + off->dump() + " are not non-negative integers");
      }
      const std::string offsets =
          "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
      if (begin > end) throw Error(at + ": " + offsets + " has begin > end");
      if (end > data_size) {
        throw Error(at + ": " + offsets + " out of bounds: the data section has " +
                    std::to_string(data_size) + " bytes (file truncated?)");
      }
      if (end - begin != nbytes) {
        throw Error(at + ": " + offsets + " do not match dtype " + t.dtype + " x shape " +
                    d::shape_string(t.shape) + " = " + std::to_string(nbytes) + " bytes");
      }
      t.bytes = std::span<const std::byte>(data + begin, static_cast<std::size_t>(nbytes));
      ranges.push_back({begin, end, parsed.size()});
      parsed.push_back(std::move(t));
    }

    std::sort(ranges.begin(), ranges.end(), [&](const Range& a, const Range& b) {
      if (a.begin != b.begin) return a.begin < b.begin;
      if (a.end != b.end) return a.end < b.end;
      return parsed[a.slot].name < parsed[b.slot].name;
    });
    for (std::size_t i = 1; i < ranges.size(); ++i) {
      const Range& prev = ranges[i - 1];
      const Range& cur = ranges[i];
      if (cur.begin < prev.end) {
        throw Error(where_ + ": tensor " + d::quoted(parsed[cur.slot].name) + " (data_offsets [" +
                    std::to_string(cur.begin) + ", " + std::to_string(cur.end) +
                    "]) overlaps tensor " + d::quoted(parsed[prev.slot].name) + " (data_offsets [" +
                    std::to_string(prev.begin) + ", " + std::to_string(prev.end) + "])");
      }
    }
    tensors_.reserve(parsed.size());
    for (const Range& r : ranges) {
      index_.emplace(parsed[r.slot].name, tensors_.size());
      tensors_.push_back(std::move(parsed[r.slot]));
    }
  }

  void convert(const TensorInfo& t, float* out) const {
    const std::byte* src = t.bytes.data();
    const std::size_t n = t.numel;
    if (t.dtype == "F32") {
      if (n) std::memcpy(out, src, n * sizeof(float));
    } else if (t.dtype == "F16" || t.dtype == "BF16") {
      const bool half = t.dtype == "F16";
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);
        out[i] = half ? f16_to_f32(v) : bf16_to_f32(v);
      }
    } else if (t.dtype == "F64") {
      for (std::size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
    } else {
      throw Error(where_ + ": tensor " + safetensors_detail::quoted(t.name) + ": dtype " + t.dtype +
                  " cannot be read as fp32 (only F32, F16, BF16, F64)");
    }
  }

  std::filesystem::path path_;
  std::string where_;
  const std::byte* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------

struct TensorToWrite {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;  // row-major, exactly product(shape) values
  std::string dtype = "F32";    // stored as F32, F16 or BF16 (rounded to nearest even)
};

namespace safetensors_detail {

// Removes the temporary file unless released; closes the descriptor if still open.
struct TmpFileGuard {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TmpFileGuard() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

inline void write_all(int fd, const void* buf, std::size_t len, const std::string& where) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    const std::size_t chunk = std::min<std::size_t>(len, std::size_t{1} << 30);
    const ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(where + ": write failed: " + errno_string(errno));
    }
    p += w;
    len -= static_cast<std::size_t>(w);
  }
}

}  // namespace safetensors_detail

// Writes `tensors` (in the given order) and `metadata` to `path`. Atomic: the bytes go to
// "<path>.tmp", are fsynced, then renamed over `path`; on any failure the temporary file is
// removed and an existing `path` is left untouched.
inline void write_safetensors(const std::filesystem::path& path,
                              const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  namespace d = safetensors_detail;
  using nlohmann::json;
  const std::string where = path.string();

  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  std::set<std::string_view> seen;
  for (const auto& t : tensors) {
    const std::string at = where + ": tensor " + d::quoted(t.name);
    if (t.name == "__metadata__") throw Error(at + ": name is reserved");
    if (!seen.insert(t.name).second) throw Error(at + ": duplicate tensor name");
    if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16") {
      throw Error(at + ": dtype " + d::quoted(t.dtype) + " cannot be written (F32, F16 or BF16)");
    }
    std::uint64_t numel = 1;
    for (const std::int64_t dim : t.shape) {
      if (dim < 0) throw Error(at + ": negative dimension in shape " + d::shape_string(t.shape));
      const auto u = static_cast<std::uint64_t>(dim);
      if (u != 0 && numel > std::numeric_limits<std::uint64_t>::max() / 8 / u) {
        if (std::find(t.shape.begin(), t.shape.end(), 0) == t.shape.end()) {
          throw Error(at + ": shape " + d::shape_string(t.shape) +
                      " overflows: element count too large");
        }
        numel = 0;
        break;
      }
      numel *= u;
    }
    if (numel != t.data.size()) {
      throw Error(at + ": shape " + d::shape_string(t.shape) + " has " + std::to_string(numel) +
                  " elements but data holds " + std::to_string(t.data.size()));
    }
    const std::uint64_t nbytes = numel * d::dtype_size(t.dtype);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N is a multiple of 8, as the reference
  const std::uint64_t n = text.size();

  d::TmpFileGuard tmp{where + ".tmp"};
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) throw Error(tmp.path + ": cannot create: " + d::errno_string(errno));
  d::write_all(tmp.fd, &n, 8, tmp.path);
  d::write_all(tmp.fd, text.data(), text.size(), tmp.path);
  std::vector<std::uint16_t> buf;
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  for (const auto& t : tensors) {
    if (t.dtype == "F32") {
      d::write_all(tmp.fd, t.data.data(), t.data.size_bytes(), tmp.path);
      continue;
    }
    const bool half = t.dtype == "F16";
    for (std::size_t i = 0; i < t.data.size(); i += kChunk) {
      const std::size_t m = std::min(kChunk, t.data.size() - i);
      buf.resize(m);
      for (std::size_t j = 0; j < m; ++j)
        buf[j] = half ? f32_to_f16(t.data[i + j]) : f32_to_bf16(t.data[i + j]);
      d::write_all(tmp.fd, buf.data(), m * 2, tmp.path);
    }
  }
  if (::fsync(tmp.fd) != 0) throw Error(tmp.path + ": fsync failed: " + d::errno_string(errno));
  const int fd = std::exchange(tmp.fd, -1);
  if (::close(fd) != 0) throw Error(tmp.path + ": close failed: " + d::errno_string(errno));
  if (::rename(tmp.path.c_str(), path.c_str()) != 0) {
    throw Error(where + ": cannot rename " + tmp.path + " over it: " + d::errno_string(errno));
  }
  tmp.keep = true;
  // Persist the rename itself (best effort: some filesystems refuse fsync on directories).
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace emergent
