#include "formats/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <string_view>
#include <unordered_set>

#include "core/load_error.hpp"

namespace orzo {

// Values are copied out of the file as they lie; a big-endian host would need byte swaps.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF is read as little-endian");

namespace {

constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // arrays of arrays are legal; unbounded nesting is not
constexpr uint64_t kMaxAlignment = 1u << 30;

[[noreturn]] void fail(const MappedFile& f, const std::string& what) { throw LoadError(f.path() + ": " + what); }

const char* type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "?";
}

// Bytes of a fixed-size value; 0 for strings and arrays.
size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::String: case GgufType::Array: return 0;
  }
  return 0;
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64: return true;
    default: return false;
  }
}

bool is_float(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads the integer at p; false when it does not fit in int64 (only a huge u64 can't).
bool load_int(GgufType t, const uint8_t* p, int64_t& out) {
  switch (t) {
    case GgufType::U8: out = load<uint8_t>(p); return true;
    case GgufType::I8: out = load<int8_t>(p); return true;
    case GgufType::U16: out = load<uint16_t>(p); return true;
    case GgufType::I16: out = load<int16_t>(p); return true;
    case GgufType::U32: out = load<uint32_t>(p); return true;
    case GgufType::I32: out = load<int32_t>(p); return true;
    case GgufType::I64: out = load<int64_t>(p); return true;
    case GgufType::U64: {
      const auto u = load<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      out = static_cast<int64_t>(u);
      return true;
    }
    default: return false;
  }
}

double load_number(GgufType t, const uint8_t* p) {
  if (t == GgufType::F32) return load<float>(p);
  if (t == GgufType::F64) return load<double>(p);
  if (t == GgufType::U64) return static_cast<double>(load<uint64_t>(p));
  int64_t i = 0;
  load_int(t, p, i);
  return static_cast<double>(i);
}

// Bounds-checked sequential reads over the file. An error names the file, the record being
// read (a key or a tensor: the context, set once per record so that walking a 150k-entry
// vocabulary builds no strings), what was being read and the offset.
class Cursor {
 public:
  Cursor(const MappedFile& file, size_t pos) : file_(file), pos_(pos) {}

  size_t pos() const { return pos_; }
  uint64_t left() const { return file_.size() - pos_; }
  void set_context(std::string context) { context_ = std::move(context); }

  [[noreturn]] void fail(const std::string& what) const {
    orzo::fail(file_, (context_.empty() ? "" : context_ + ": ") + what + " (at byte " + std::to_string(pos_) + ")");
  }

  void need(uint64_t n, const char* what) const {
    if (n > left()) truncated(what, n);
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += static_cast<size_t>(n);
  }
  uint32_t u32(const char* what) {
    need(4, what);
    const auto v = load<uint32_t>(file_.data() + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* what) {
    need(8, what);
    const auto v = load<uint64_t>(file_.data() + pos_);
    pos_ += 8;
    return v;
  }
  std::string_view str(const char* what) {
    if (left() < 8) truncated(std::string(what) + " length", 8);
    const uint64_t n = load<uint64_t>(file_.data() + pos_);
    pos_ += 8;
    if (n > left()) truncated(std::string(what) + " of length " + std::to_string(n), n);
    std::string_view s(reinterpret_cast<const char*>(file_.data() + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A `count` of items that each take at least `min_bytes` must fit in what is left: the
  // check that stops a corrupt count from driving a huge loop or allocation.
  bool fits(uint64_t count, uint64_t min_bytes) const { return count <= left() / min_bytes; }
  void check_count(uint64_t count, uint64_t min_bytes, const char* what) const {
    if (!fits(count, min_bytes)) too_many(what, count);
  }
  GgufType type(const char* what) {
    const uint32_t t = u32(what);
    if (t > static_cast<uint32_t>(GgufType::F64))
      fail(std::string(what) + " " + std::to_string(t) + " is not a GGUF value type");
    return static_cast<GgufType>(t);
  }

  // Validates one value of type t and moves past it.
  void skip_value(GgufType t, int depth) {
    if (t == GgufType::String) {
      str("string");
    } else if (t == GgufType::Array) {
      if (depth >= kMaxArrayDepth) fail("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      const GgufType elem = type("array element type");
      const uint64_t n = u64("array count");
      skip_array(elem, n, depth + 1);
    } else if (t == GgufType::Bool) {
      need(1, "bool");
      if (file_.data()[pos_] > 1) fail("bool byte " + std::to_string(file_.data()[pos_]) + " is not 0 or 1");
      ++pos_;
    } else {
      skip(scalar_size(t), type_name(t));
    }
  }
  void skip_array(GgufType elem, uint64_t n, int depth) {
    const uint64_t min_bytes = elem == GgufType::String ? 8 : elem == GgufType::Array ? 12 : scalar_size(elem);
    if (!fits(n, min_bytes)) too_many("array of " + std::string(type_name(elem)), n);
    if (scalar_size(elem) != 0 && elem != GgufType::Bool) {
      pos_ += static_cast<size_t>(n * min_bytes);
      return;
    }
    for (uint64_t i = 0; i < n; ++i) skip_value(elem, depth);
  }

 private:
  [[noreturn]] void truncated(const std::string& what, uint64_t n) const {
    fail("truncated: " + what + " needs " + std::to_string(n) + " bytes, " + std::to_string(left()) + " left");
  }
  [[noreturn]] void too_many(const std::string& what, uint64_t count) const {
    fail(what + " count " + std::to_string(count) + " cannot fit in the " + std::to_string(left()) + " bytes left");
  }

  const MappedFile& file_;
  size_t pos_;
  std::string context_;
};

// GGML's type ids of the types orzo reads, in DType order.
constexpr std::pair<DType, uint32_t> kGgmlIds[] = {
    {DType::F32, 0},   {DType::F16, 1},   {DType::BF16, 30}, {DType::Q8_0, 8},    {DType::Q4_0, 2},
    {DType::Q4_1, 3},  {DType::Q5_0, 6},  {DType::Q5_1, 7},  {DType::Q2_K, 10},   {DType::Q3_K, 11},
    {DType::Q4_K, 12}, {DType::Q5_K, 13}, {DType::Q6_K, 14}, {DType::IQ4_NL, 20}, {DType::IQ4_XS, 23}};

std::string ggml_type_label(uint32_t t) {
  static const std::pair<uint32_t, const char*> known[] = {
      {9, "Q8_1"},     {15, "Q8_K"},  {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
      {21, "IQ3_S"},   {22, "IQ2_S"}, {24, "I8"},      {25, "I16"},    {26, "I32"},     {27, "I64"},
      {28, "F64"},     {29, "IQ1_M"}, {34, "TQ1_0"},   {35, "TQ2_0"},  {39, "MXFP4"}};
  for (const auto& [id, name] : known)
    if (id == t) return std::to_string(t) + " (" + name + ")";
  return std::to_string(t);
}

std::string supported_types() {
  std::string list;
  for (const auto& [dtype, id] : kGgmlIds) list += (list.empty() ? "" : ", ") + std::string(dtype_name(dtype));
  return list;
}

}  // namespace

uint32_t ggml_type_of(DType t) {
  for (const auto& [dtype, id] : kGgmlIds)
    if (dtype == t) return id;
  return std::numeric_limits<uint32_t>::max();
}

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const auto& [dtype, id] : kGgmlIds)
    if (id == ggml_type) return dtype;
  return std::nullopt;
}

GgufMetadata GgufMetadata::parse(std::shared_ptr<const MappedFile> file, size_t& pos, uint64_t count) {
  GgufMetadata meta;
  Cursor in(*file, pos);
  // The smallest pair: an empty key (8), its type (4) and a one-byte value.
  in.check_count(count, 13, "metadata key/value");
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context("metadata key " + std::to_string(i));
    const std::string key(in.str("name"));
    in.set_context("key '" + key + "'");
    const GgufType type = in.type("value type");
    Entry e{type, GgufType::U8, 0, in.pos(), 0};
    if (type == GgufType::Array) {
      e.elem_type = in.type("array element type");
      e.count = in.u64("array count");
      e.offset = in.pos();
      in.skip_array(e.elem_type, e.count, 1);
    } else {
      in.skip_value(type, 0);
    }
    e.end = in.pos();
    if (!meta.entries_.emplace(key, e).second) in.fail("appears twice");
  }
  pos = in.pos();
  meta.file_ = std::move(file);
  return meta;
}

GgufRawValue GgufMetadata::raw(const std::string& key) const {
  const Entry& e = entry(key);
  // An array's element type (4 bytes) and count (8) precede its first element.
  const size_t begin = e.type == GgufType::Array ? e.offset - 12 : e.offset;
  return {e.type, std::string_view(reinterpret_cast<const char*>(file_->data() + begin), e.end - begin)};
}

std::vector<std::string> GgufMetadata::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

const GgufMetadata::Entry& GgufMetadata::entry(const std::string& key) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) throw LoadError((file_ ? file_->path() : std::string("GGUF")) + ": missing key '" + key + "'");
  return it->second;
}

void GgufMetadata::wrong_type(const std::string& key, const char* wanted) const {
  const Entry& e = entry(key);
  std::string have = type_name(e.type);
  if (e.type == GgufType::Array) have += std::string(" of ") + type_name(e.elem_type);
  throw LoadError(file_->path() + ": key '" + key + "' is " + have + ", expected " + wanted);
}

int64_t GgufMetadata::get_int(const std::string& key) const {
  const Entry& e = entry(key);
  if (!is_integer(e.type)) wrong_type(key, "an integer");
  int64_t v = 0;
  if (!load_int(e.type, file_->data() + e.offset, v))
    throw LoadError(file_->path() + ": key '" + key + "' value does not fit in int64");
  return v;
}

double GgufMetadata::get_float(const std::string& key) const {
  const Entry& e = entry(key);
  if (!is_integer(e.type) && !is_float(e.type)) wrong_type(key, "a number");
  return load_number(e.type, file_->data() + e.offset);
}

bool GgufMetadata::get_bool(const std::string& key) const {
  const Entry& e = entry(key);
  if (e.type != GgufType::Bool) wrong_type(key, "a bool");
  return file_->data()[e.offset] != 0;
}

std::string GgufMetadata::get_string(const std::string& key) const {
  const Entry& e = entry(key);
  if (e.type != GgufType::String) wrong_type(key, "a string");
  const uint8_t* p = file_->data() + e.offset;
  return std::string(reinterpret_cast<const char*>(p + 8), static_cast<size_t>(load<uint64_t>(p)));
}

std::vector<std::string> GgufMetadata::get_string_array(const std::string& key) const {
  const Entry& e = entry(key);
  if (e.type != GgufType::Array || e.elem_type != GgufType::String) wrong_type(key, "an array of string");
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(e.count));
  const uint8_t* p = file_->data() + e.offset;
  for (uint64_t i = 0; i < e.count; ++i) {
    const auto n = static_cast<size_t>(load<uint64_t>(p));
    out.emplace_back(reinterpret_cast<const char*>(p + 8), n);
    p += 8 + n;
  }
  return out;
}

std::vector<int64_t> GgufMetadata::get_int_array(const std::string& key) const {
  const Entry& e = entry(key);
  if (e.type != GgufType::Array || !is_integer(e.elem_type)) wrong_type(key, "an array of integers");
  const size_t step = scalar_size(e.elem_type);
  std::vector<int64_t> out(static_cast<size_t>(e.count));
  const uint8_t* p = file_->data() + e.offset;
  for (auto& v : out) {
    if (!load_int(e.elem_type, p, v))
      throw LoadError(file_->path() + ": key '" + key + "' has an element that does not fit in int64");
    p += step;
  }
  return out;
}

std::vector<double> GgufMetadata::get_float_array(const std::string& key) const {
  const Entry& e = entry(key);
  if (e.type != GgufType::Array || !(is_integer(e.elem_type) || is_float(e.elem_type)))
    wrong_type(key, "an array of numbers");
  const size_t step = scalar_size(e.elem_type);
  std::vector<double> out(static_cast<size_t>(e.count));
  const uint8_t* p = file_->data() + e.offset;
  for (auto& v : out) {
    v = load_number(e.elem_type, p);
    p += step;
  }
  return out;
}

std::optional<int64_t> GgufMetadata::find_int(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}

std::optional<double> GgufMetadata::find_float(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}

std::optional<std::string> GgufMetadata::find_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

GgufFile read_gguf(const std::string& path) { return read_gguf(MappedFile::open(path)); }

namespace {

struct GgufHeader {
  uint32_t version;
  uint64_t tensor_count;
  uint64_t kv_count;
  size_t end;  // the first byte of the metadata
};

GgufHeader read_header(const MappedFile& f) {
  Cursor head(f, 0);
  head.need(4, "magic");
  if (std::memcmp(f.data(), "GGUF", 4) != 0) fail(f, "not a GGUF file (bad magic)");
  head.skip(4, "magic");

  GgufHeader h{};
  h.version = head.u32("version");
  if (h.version == 1)
    fail(f, "GGUF version 1 is not supported (it predates 64-bit counts); re-convert the model with a current llama.cpp");
  if (h.version != 2 && h.version != 3) {
    const bool swapped = __builtin_bswap32(h.version) == 2 || __builtin_bswap32(h.version) == 3;
    fail(f, "unsupported GGUF version " + std::to_string(h.version) +
                (swapped ? " (a big-endian file; only little-endian is supported)" : ""));
  }
  h.tensor_count = head.u64("tensor count");
  h.kv_count = head.u64("metadata key/value count");
  // Checked here, before the metadata is read, so a huge count fails fast; each tensor
  // info takes at least a name length, n_dims, type and offset.
  head.check_count(h.tensor_count, 24, "tensor");
  h.end = head.pos();
  return h;
}

uint64_t data_alignment(const MappedFile& f, const GgufMetadata& metadata) {
  const auto a = metadata.find_int("general.alignment");
  if (!a) return kGgufDefaultAlignment;
  if (*a <= 0 || static_cast<uint64_t>(*a) > kMaxAlignment || (*a & (*a - 1)) != 0)
    fail(f, "general.alignment " + std::to_string(*a) + " is not a power of two up to 2^30");
  return static_cast<uint64_t>(*a);
}

// Reads the dims into `shape`, outermost first (GGUF lists the innermost first), and returns
// the element count, which fits in int64.
uint64_t read_shape(Cursor& in, std::vector<int64_t>& shape) {
  const uint32_t n_dims = in.u32("n_dims");
  if (n_dims > kMaxDims) in.fail("has " + std::to_string(n_dims) + " dims (at most 4)");
  shape.resize(n_dims);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = in.u64("dim");
    if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, ne, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      in.fail("too many elements");
    shape[n_dims - 1 - d] = static_cast<int64_t>(ne);
  }
  return numel;
}

DType read_dtype(Cursor& in, const MappedFile& f, const std::string& label) {
  const uint32_t ggml_type = in.u32("type");
  const auto dtype = dtype_from_ggml(ggml_type);
  if (!dtype)
    fail(f, label + " has ggml type " + ggml_type_label(ggml_type) +
                ", which is not supported (supported: " + supported_types() + ")");
  return *dtype;
}

// The bytes of a tensor of `numel` elements of view's shape and dtype. numel fits in int64
// but its size in bytes may not fit anywhere.
uint64_t tensor_bytes(const Cursor& in, const MappedFile& f, const std::string& label, const TensorView& view,
                      uint64_t numel) {
  const uint64_t cols = view.shape.empty() ? 1 : static_cast<uint64_t>(view.shape.back());
  const auto block = static_cast<uint64_t>(dtype_block_elems(view.dtype));
  if (cols % block != 0)
    fail(f, label + " is " + dtype_name(view.dtype) + " but its row length " + std::to_string(cols) +
                " is not a multiple of " + std::to_string(block));
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel / block, static_cast<uint64_t>(dtype_block_bytes(view.dtype)), &nbytes))
    in.fail("too many bytes");
  return nbytes;
}

// Where a tensor's bytes start in the data section, and the tensor's index in file order.
struct DataOffset {
  uint64_t offset;
  size_t index;
};

// The tensor infos, into `tensors`; what each holds is checked as it is read, except the
// data offsets against the data section, which starts only after the last info.
std::vector<DataOffset> read_tensor_infos(Cursor& in, const MappedFile& f, uint64_t count, uint64_t alignment,
                                          std::vector<TensorView>& tensors) {
  std::vector<DataOffset> offsets;
  offsets.reserve(static_cast<size_t>(count));
  tensors.reserve(static_cast<size_t>(count));
  std::unordered_set<std::string_view> names;
  for (uint64_t i = 0; i < count; ++i) {
    in.set_context("tensor " + std::to_string(i));
    const std::string_view name = in.str("name");
    const std::string label = "tensor '" + std::string(name) + "'";
    in.set_context(label);
    if (!names.insert(name).second) in.fail("appears twice");
    TensorView view;
    view.name = std::string(name);
    view.file = f.path();
    const uint64_t numel = read_shape(in, view.shape);
    view.dtype = read_dtype(in, f, label);
    const uint64_t nbytes = tensor_bytes(in, f, label, view, numel);
    const uint64_t offset = in.u64("offset");
    if (offset % alignment != 0)
      fail(f, label + " data offset " + std::to_string(offset) + " is not a multiple of the alignment " +
                  std::to_string(alignment));
    view.nbytes = static_cast<size_t>(nbytes);
    offsets.push_back({offset, tensors.size()});
    tensors.push_back(std::move(view));
  }
  return offsets;
}

// Points each tensor at its bytes, which must lie inside the data section: from `data_start`
// to the end of the file.
void locate_tensor_data(const MappedFile& f, uint64_t data_start, const std::vector<DataOffset>& offsets,
                        std::vector<TensorView>& tensors) {
  const uint64_t data_bytes = data_start > f.size() ? 0 : f.size() - data_start;
  for (const auto& at : offsets) {
    TensorView& view = tensors[at.index];
    if (at.offset > data_bytes || view.nbytes > data_bytes - at.offset)
      fail(f, "tensor '" + view.name + "' data [" + std::to_string(at.offset) + ", +" + std::to_string(view.nbytes) +
                  ") runs past the " + std::to_string(data_bytes) + "-byte data section (truncated?)");
    view.data = f.data() + data_start + at.offset;
  }
}

// No two tensors with bytes may share any.
void check_no_overlap(const MappedFile& f, std::vector<DataOffset> offsets, const std::vector<TensorView>& tensors) {
  std::sort(offsets.begin(), offsets.end(), [](const DataOffset& a, const DataOffset& b) { return a.offset < b.offset; });
  const DataOffset* previous = nullptr;
  for (const auto& at : offsets) {
    if (tensors[at.index].nbytes == 0) continue;
    if (previous && at.offset < previous->offset + tensors[previous->index].nbytes)
      fail(f, "tensors '" + tensors[previous->index].name + "' and '" + tensors[at.index].name + "' overlap");
    previous = &at;
  }
}

}  // namespace

GgufFile read_gguf(std::shared_ptr<const MappedFile> file) {
  const MappedFile& f = *file;
  const GgufHeader header = read_header(f);
  GgufFile result;
  result.version = header.version;

  size_t pos = header.end;
  result.metadata = GgufMetadata::parse(file, pos, header.kv_count);
  Cursor in(f, pos);
  in.check_count(header.tensor_count, 24, "tensor");
  const uint64_t alignment = data_alignment(f, result.metadata);
  std::vector<DataOffset> offsets = read_tensor_infos(in, f, header.tensor_count, alignment, result.tensors);

  const uint64_t data_start = (in.pos() + alignment - 1) / alignment * alignment;
  locate_tensor_data(f, data_start, offsets, result.tensors);
  check_no_overlap(f, std::move(offsets), result.tensors);
  result.file = std::move(file);
  return result;
}

}  // namespace orzo
