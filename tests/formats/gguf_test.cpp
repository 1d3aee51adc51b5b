// The GGUF reader on the real stories260K file, writer -> reader round trips for every
// dtype and metadata type, and damaged files: each must fail with a LoadError that names
// the file (and the key or tensor), never crash or attempt a huge allocation.
#include "formats/gguf.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/load_error.hpp"
#include "formats/gguf_writer.hpp"
#include "kernels/cpu/convert.hpp"

#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(ORZO_SHARED_DIR) + "/models/stories260K";

using testing::Bytes;

using GgufTest = testing::TempDirTest;

using testing::read_bytes;
using testing::write_bytes;

template <typename T>
void poke(Bytes& b, size_t at, T v) {
  ASSERT_LE(at + sizeof v, b.size());
  std::memcpy(b.data() + at, &v, sizeof v);
}

// Offset of the first occurrence of `s` in b (GGUF strings are length-prefixed, so the
// bytes of a key or tensor name locate its record).
size_t find(const Bytes& b, const std::string& s) {
  const auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << s;
  return static_cast<size_t>(it - b.begin());
}

// Writes `b` to `file` and expects read_gguf to throw a LoadError mentioning the file and
// every one of `needles`.
void expect_load_error(const std::string& file, const Bytes& b, const std::vector<std::string>& needles) {
  write_bytes(file, b);
  try {
    read_gguf(file);
    ADD_FAILURE() << "no error for " << file;
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

// Raw GGUF bytes, for damage the writer cannot produce.
struct Raw {
  Bytes b;
  template <typename T>
  Raw& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Raw& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Raw& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return put(version).put(tensors).put(kvs);
  }
  Raw& key(const std::string& k, GgufType t) { return str(k).put(static_cast<uint32_t>(t)); }
};

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * std::sin(0.37f * static_cast<float>(i) + 0.1f);
  return v;
}

Bytes encode(DType t, const std::vector<float>& values, int64_t cols) {
  const size_t row_bytes = dtype_row_bytes(t, cols);
  const auto rows = static_cast<int64_t>(values.size()) / cols;
  Bytes out(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_row(t, values.data() + r * cols, cols, out.data() + static_cast<size_t>(r) * row_bytes);
  return out;
}

TEST(GgufStories260K, TensorsAndMetadata) {
  const GgufFile f = read_gguf(kStories + "/stories260K.gguf");
  EXPECT_EQ(f.version, 3u);
  ASSERT_EQ(f.tensors.size(), 48u);
  std::map<std::string, const TensorView*> by_name;
  for (const auto& t : f.tensors) {
    EXPECT_EQ(t.dtype, DType::F32) << t.name;
    EXPECT_EQ(t.file, kStories + "/stories260K.gguf");
    EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel()) * 4) << t.name;
    by_name[t.name] = &t;
  }
  const auto shape = [&](const std::string& name) {
    EXPECT_TRUE(by_name.count(name)) << name;
    return by_name.count(name) ? by_name[name]->shape : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape("token_embd.weight"), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(shape("output.weight"), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(shape("output_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape("blk.0.attn_q.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape("blk.4.attn_k.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape("blk.2.ffn_gate.weight"), (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(shape("blk.2.ffn_down.weight"), (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(shape("blk.3.attn_norm.weight"), (std::vector<int64_t>{64}));

  const GgufMetadata& m = f.metadata;
  EXPECT_EQ(m.get_string("general.architecture"), "llama");
  EXPECT_EQ(m.get_int("llama.block_count"), 5);
  EXPECT_EQ(m.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(m.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(m.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(m.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(m.get_int("llama.context_length"), 2048);
  EXPECT_EQ(m.get_int("llama.rope.dimension_count"), 8);
  EXPECT_NEAR(m.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-10);
  EXPECT_EQ(m.get_float("llama.block_count"), 5.0);
  EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(m.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(m.get_int("tokenizer.ggml.eos_token_id"), 2);
  const auto tokens = m.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(m.get_float_array("tokenizer.ggml.scores").size(), 512u);
  const auto types = m.get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[3], 6);
  EXPECT_FALSE(m.find_int("general.alignment"));
  EXPECT_FALSE(m.has("no.such.key"));
  EXPECT_EQ(m.find_string("general.architecture"), "llama");

  // The GGUF copy is bit-identical to the llama2.c checkpoint, whose embedding follows a
  // 7-int32 header.
  const Bytes bin = read_bytes(kStories + "/stories260K.bin");
  const TensorView& embd = *by_name["token_embd.weight"];
  ASSERT_GE(bin.size(), 28 + embd.nbytes);
  EXPECT_EQ(std::memcmp(embd.data, bin.data() + 28, embd.nbytes), 0);
}

TEST(GgufStories260K, WrongTypeAndMissingKeysNameFileAndKey) {
  const std::string file = kStories + "/stories260K.gguf";
  const GgufFile f = read_gguf(file);
  const auto expect_error = [&](auto&& get, const std::string& key) {
    try {
      get();
      ADD_FAILURE() << key;
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  };
  const GgufMetadata& m = f.metadata;
  expect_error([&] { return m.get_int("general.architecture"); }, "general.architecture");
  expect_error([&] { return m.get_string("llama.block_count"); }, "llama.block_count");
  expect_error([&] { return m.get_bool("llama.block_count"); }, "llama.block_count");
  expect_error([&] { return m.get_int("llama.attention.layer_norm_rms_epsilon"); },
               "llama.attention.layer_norm_rms_epsilon");
  expect_error([&] { return m.get_string_array("tokenizer.ggml.scores"); }, "tokenizer.ggml.scores");
  expect_error([&] { return m.get_int_array("tokenizer.ggml.tokens"); }, "tokenizer.ggml.tokens");
  expect_error([&] { return m.get_float_array("general.architecture"); }, "general.architecture");
  expect_error([&] { return m.get_int("missing.key"); }, "missing.key");
  expect_error([&] { return m.find_int("general.architecture"); }, "general.architecture");
}

TEST_F(GgufTest, RoundTripsEveryDtypeAndShape) {
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {"f32.vector", DType::F32, {7}},         {"f32.matrix", DType::F32, {3, 5}},
      {"f16.matrix", DType::F16, {4, 9}},      {"bf16.cube", DType::BF16, {2, 3, 4}},
      {"q8_0.matrix", DType::Q8_0, {3, 64}},   {"q4_0.matrix", DType::Q4_0, {2, 96}},
      {"f32.4d", DType::F32, {2, 1, 3, 2}},    {"f16.empty", DType::F16, {0, 8}},
  };
  for (const uint32_t alignment : {32u, 64u}) {
    const std::string file = path("model-" + std::to_string(alignment) + ".gguf");
    std::vector<Bytes> data;
    {
      GgufWriter w(file, alignment);
      w.add_string("general.architecture", "test");
      for (const auto& c : cases) w.add_tensor(c.name, c.dtype, c.shape);
      for (const auto& c : cases) {
        int64_t numel = 1;
        for (auto d : c.shape) numel *= d;
        data.push_back(encode(c.dtype, ramp(numel, 1.5f), c.shape.back()));
        // In two pieces, to exercise streaming.
        const size_t half = data.back().size() / 2;
        w.write_tensor_data(data.back().data(), half);
        w.write_tensor_data(data.back().data() + half, data.back().size() - half);
      }
      w.finish();
    }
    const GgufFile f = read_gguf(file);
    ASSERT_EQ(f.tensors.size(), cases.size());
    EXPECT_EQ(f.metadata.find_int("general.alignment").value_or(32), alignment);
    for (size_t i = 0; i < cases.size(); ++i) {
      const TensorView& t = f.tensors[i];
      EXPECT_EQ(t.name, cases[i].name);
      EXPECT_EQ(t.dtype, cases[i].dtype) << t.name;
      EXPECT_EQ(t.shape, cases[i].shape) << t.name;
      ASSERT_EQ(t.nbytes, data[i].size()) << t.name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignment, 0u) << t.name;
      if (t.nbytes) {
        EXPECT_EQ(std::memcmp(t.data, data[i].data(), t.nbytes), 0) << t.name;
      }
    }
  }
}

TEST_F(GgufTest, RoundTripsEveryMetadataType) {
  const std::string file = path("meta.gguf");
  std::vector<std::string> vocab;
  for (int i = 0; i < 150000; ++i) vocab.push_back("tok" + std::to_string(i) + (i % 7 == 0 ? "\xe2\x96\x81x" : ""));
  {
    GgufWriter w(file);
    w.add_u8("u8", 200);
    w.add_i8("i8", -100);
    w.add_u16("u16", 60000);
    w.add_i16("i16", -30000);
    w.add_u32("u32", 4000000000u);
    w.add_i32("i32", -2000000000);
    w.add_u64("u64", 1ull << 40);
    w.add_u64("u64.huge", std::numeric_limits<uint64_t>::max());
    w.add_i64("i64", -(1ll << 50));
    w.add_f32("f32", 0.25f);
    w.add_f64("f64", 1e-300);
    w.add_bool("yes", true);
    w.add_bool("no", false);
    w.add_string("s", std::string("with\0nul", 8));
    w.add_string("empty", "");
    w.add_string_array("vocab", vocab);
    w.add_i32_array("ints", {-1, 0, 7});
    w.add_f32_array("floats", {0.5f, -2.0f});
    w.add_string_array("no.strings", {});
    w.finish();
  }
  const GgufFile f = read_gguf(file);
  const GgufMetadata& m = f.metadata;
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_EQ(m.keys().size(), 19u);
  EXPECT_EQ(m.get_int("u8"), 200);
  EXPECT_EQ(m.get_int("i8"), -100);
  EXPECT_EQ(m.get_int("u16"), 60000);
  EXPECT_EQ(m.get_int("i16"), -30000);
  EXPECT_EQ(m.get_int("u32"), 4000000000ll);
  EXPECT_EQ(m.get_int("i32"), -2000000000);
  EXPECT_EQ(m.get_int("u64"), 1ll << 40);
  EXPECT_THROW(m.get_int("u64.huge"), LoadError);
  EXPECT_EQ(m.get_float("u64.huge"), 18446744073709551616.0);
  EXPECT_EQ(m.get_int("i64"), -(1ll << 50));
  EXPECT_EQ(m.get_float("f32"), 0.25);
  EXPECT_EQ(m.get_float("f64"), 1e-300);
  EXPECT_EQ(m.get_float("i8"), -100.0);
  EXPECT_EQ(m.find_float("f32"), 0.25);
  EXPECT_EQ(m.find_int("i16"), -30000);
  EXPECT_TRUE(m.get_bool("yes"));
  EXPECT_FALSE(m.get_bool("no"));
  EXPECT_EQ(m.get_string("s"), std::string("with\0nul", 8));
  EXPECT_EQ(m.get_string("empty"), "");
  EXPECT_EQ(m.get_string_array("vocab"), vocab);
  EXPECT_EQ(m.get_int_array("ints"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(m.get_float_array("floats"), (std::vector<double>{0.5, -2.0}));
  EXPECT_EQ(m.get_float_array("ints"), (std::vector<double>{-1, 0, 7}));
  EXPECT_TRUE(m.get_string_array("no.strings").empty());
  EXPECT_THROW(m.get_int("f32"), LoadError);
}

TEST_F(GgufTest, VersionTwoReadsAndOtherVersionsAreRefused) {
  const std::string file = path("v.gguf");
  {
    GgufWriter w(file);
    w.add_u32("x", 1);
    w.add_tensor("t", DType::F32, {8});
    const std::vector<float> v(8, 1.0f);
    w.write_tensor_data(v.data(), 32);
    w.finish();
  }
  Bytes b = read_bytes(file);
  poke<uint32_t>(b, 4, 2);
  write_bytes(file, b);
  EXPECT_EQ(read_gguf(file).version, 2u);
  poke<uint32_t>(b, 4, 1);
  expect_load_error(file, b, {"version 1"});
  poke<uint32_t>(b, 4, 4);
  expect_load_error(file, b, {"version 4"});
  poke<uint32_t>(b, 4, 0x03000000u);
  expect_load_error(file, b, {"big-endian"});
}

TEST_F(GgufTest, FilesystemErrorsNameThePath) {
  expect_load_error(path("empty.gguf"), {}, {"truncated"});
  const std::string missing = path("missing.gguf");
  try {
    read_gguf(missing);
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  try {
    read_gguf(dir_.string());
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
  }
}

// A small but complete file: a string, an array and a few tensors, the last one ending on
// an alignment boundary so that every proper prefix of the file is damaged.
Bytes sample_file(const std::string& file) {
  {
    GgufWriter w(file);
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 1);
    w.add_string_array("tokenizer.ggml.tokens", {"a", "bc", "def"});
    w.add_tensor("blk.0.attn_q.weight", DType::Q8_0, {2, 32});
    w.add_tensor("blk.0.ffn_up.weight", DType::F16, {3, 4});
    w.add_tensor("output_norm.weight", DType::F32, {8});
    w.write_tensor_data(encode(DType::Q8_0, ramp(64, 1.0f), 32).data(), 68);
    w.write_tensor_data(encode(DType::F16, ramp(12, 1.0f), 4).data(), 24);
    w.write_tensor_data(encode(DType::F32, ramp(8, 1.0f), 8).data(), 32);
    w.finish();
  }
  return read_bytes(file);
}

TEST_F(GgufTest, EveryTruncationIsALoadError) {
  const std::string file = path("trunc.gguf");
  const Bytes full = sample_file(file);
  ASSERT_EQ(read_gguf(file).tensors.size(), 3u);
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    expect_load_error(file, Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)), {});
  }
}

TEST_F(GgufTest, CorruptHeaderFields) {
  const std::string file = path("bad.gguf");
  const Bytes good = sample_file(file);
  Bytes b = good;
  b[0] = 'X';
  expect_load_error(file, b, {"magic"});

  b = good;
  poke<uint64_t>(b, 8, 1ull << 60);
  expect_load_error(file, b, {"tensor count"});
  b = good;
  poke<uint64_t>(b, 8, std::numeric_limits<uint64_t>::max());
  expect_load_error(file, b, {"tensor count"});
  b = good;
  poke<uint64_t>(b, 8, 4);  // one more tensor than there are infos
  expect_load_error(file, b, {});
  b = good;
  poke<uint64_t>(b, 16, 1ull << 62);
  expect_load_error(file, b, {"key/value count"});
  b = good;
  poke<uint64_t>(b, 24, 1ull << 62);  // length of the first key
  expect_load_error(file, b, {"metadata key 0"});
}

TEST_F(GgufTest, CorruptMetadataNamesTheKey) {
  const std::string file = path("bad.gguf");
  const Bytes good = sample_file(file);

  Bytes b = good;
  size_t at = find(b, "general.architecture") + 20 + 4;  // past the key and its type: the value's length
  poke<uint64_t>(b, at, 1ull << 62);
  expect_load_error(file, b, {"'general.architecture'", "string"});

  b = good;
  at = find(b, "tokenizer.ggml.tokens") + 21 + 4 + 4;  // past the key, its type and the element type
  poke<uint64_t>(b, at, 1ull << 61);
  expect_load_error(file, b, {"'tokenizer.ggml.tokens'", "count"});
  b = good;
  poke<uint64_t>(b, at + 8, 1ull << 61);  // the first element's length
  expect_load_error(file, b, {"'tokenizer.ggml.tokens'"});
  b = good;
  poke<uint32_t>(b, at - 4, 42);  // element type
  expect_load_error(file, b, {"'tokenizer.ggml.tokens'", "42"});

  b = good;
  at = find(b, "llama.block_count") + 17;
  poke<uint32_t>(b, at, 13);  // value type
  expect_load_error(file, b, {"'llama.block_count'", "13"});

}

TEST_F(GgufTest, DuplicateKeysAndOddValuesAreRefused) {
  const std::string file = path("raw.gguf");
  expect_load_error(file, Raw().header(0, 2).key("k", GgufType::U8).put<uint8_t>(1).key("k", GgufType::U8).put<uint8_t>(2).b,
                    {"'k'", "twice"});
  expect_load_error(file, Raw().header(0, 1).key("flag", GgufType::Bool).put<uint8_t>(2).b, {"'flag'", "bool"});
  Raw nested;
  nested.header(0, 1).key("deep", GgufType::Array);
  for (int i = 0; i < 20; ++i) nested.put(static_cast<uint32_t>(GgufType::Array)).put<uint64_t>(1);
  nested.put(static_cast<uint32_t>(GgufType::U8)).put<uint64_t>(0);
  expect_load_error(file, nested.b, {"'deep'", "nested"});
  Raw ok_nested;
  ok_nested.header(0, 1).key("two", GgufType::Array).put(static_cast<uint32_t>(GgufType::Array)).put<uint64_t>(2);
  for (int i = 0; i < 2; ++i) ok_nested.put(static_cast<uint32_t>(GgufType::U16)).put<uint64_t>(1).put<uint16_t>(7);
  write_bytes(file, ok_nested.b);
  EXPECT_THROW(read_gguf(file).metadata.get_int_array("two"), LoadError);
  expect_load_error(file, Raw().header(0, 1).key("general.alignment", GgufType::U32).put<uint32_t>(48).b,
                    {"alignment"});
  expect_load_error(file, Raw().header(0, 1).key("big", GgufType::Array).put(static_cast<uint32_t>(GgufType::U64))
                              .put<uint64_t>(1ull << 61).b,
                    {"'big'"});
}

// Byte offsets inside one tensor info record, found through the stored name.
struct InfoAt {
  size_t n_dims, ne0, type, offset;
};
InfoAt info_at(const Bytes& b, const std::string& name, uint32_t n_dims) {
  const size_t at = find(b, name) + name.size();
  return {at, at + 4, at + 4 + 8 * n_dims, at + 8 + 8 * n_dims};
}

TEST_F(GgufTest, CorruptTensorInfoNamesTheTensor) {
  const std::string file = path("bad.gguf");
  const Bytes good = sample_file(file);
  const InfoAt q = info_at(good, "blk.0.attn_q.weight", 2);
  const InfoAt up = info_at(good, "blk.0.ffn_up.weight", 2);

  Bytes b = good;
  poke<uint32_t>(b, q.type, 16);
  expect_load_error(file, b, {"'blk.0.attn_q.weight'", "ggml type 16 (IQ2_XXS)"});
  b = good;
  poke<uint32_t>(b, q.type, 1000);
  expect_load_error(file, b, {"'blk.0.attn_q.weight'", "1000"});
  b = good;
  poke<uint32_t>(b, q.n_dims, 5);
  expect_load_error(file, b, {"'blk.0.attn_q.weight'", "dims"});
  b = good;
  poke<uint32_t>(b, q.n_dims, 1u << 30);
  expect_load_error(file, b, {"'blk.0.attn_q.weight'"});
  b = good;
  poke<uint64_t>(b, q.ne0, 48);  // Q8_0 rows must be whole blocks
  expect_load_error(file, b, {"'blk.0.attn_q.weight'", "multiple of 32"});
  b = good;
  poke<uint64_t>(b, up.ne0, 1ull << 40);
  poke<uint64_t>(b, up.ne0 + 8, 1ull << 40);
  expect_load_error(file, b, {"'blk.0.ffn_up.weight'", "too many"});
  b = good;
  poke<uint64_t>(b, up.ne0, std::numeric_limits<uint64_t>::max());
  expect_load_error(file, b, {"'blk.0.ffn_up.weight'"});
  b = good;
  poke<uint64_t>(b, up.ne0, 1ull << 31);  // fits in the header, not in the data section
  expect_load_error(file, b, {"'blk.0.ffn_up.weight'", "runs past"});
  b = good;
  poke<uint64_t>(b, up.offset, 1ull << 40);
  expect_load_error(file, b, {"'blk.0.ffn_up.weight'", "runs past"});
  b = good;
  poke<uint64_t>(b, up.offset, std::numeric_limits<uint64_t>::max() - 31);
  expect_load_error(file, b, {"'blk.0.ffn_up.weight'"});
  b = good;
  poke<uint64_t>(b, up.offset, 8);
  expect_load_error(file, b, {"'blk.0.ffn_up.weight'", "alignment"});
  b = good;
  poke<uint64_t>(b, up.offset, 32);  // inside attn_q's 68 bytes
  expect_load_error(file, b, {"'blk.0.attn_q.weight'", "'blk.0.ffn_up.weight'", "overlap"});
  b = good;
  poke<uint64_t>(b, find(b, "blk.0.ffn_up.weight") - 8, 1ull << 62);  // name length
  expect_load_error(file, b, {"tensor 1", "name"});
  b = good;  // two tensors with one name
  std::memcpy(b.data() + find(b, "blk.0.ffn_up.weight"), "blk.0.attn_q.weight", 19);
  expect_load_error(file, b, {"'blk.0.attn_q.weight'", "twice"});
}

// Every block type: sized by its blocks, its bytes read back untouched, a row that is not a
// whole number of blocks and data cut short both refused, naming the tensor.
TEST_F(GgufTest, EveryBlockTypeIsSizedByItsBlocks) {
  for (DType t : kAllDTypes) {
    if (!dtype_is_quantized(t)) continue;
    SCOPED_TRACE(dtype_name(t));
    const std::string file = path(std::string("blocks-") + dtype_name(t) + ".gguf");
    const int64_t cols = 2 * dtype_block_elems(t);
    Bytes data(dtype_row_bytes(t, cols) * 3);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
    {
      GgufWriter w(file);
      w.add_tensor("blk.0.ffn_down.weight", t, {3, cols});
      w.write_tensor_data(data.data(), data.size());
      w.finish();
    }
    const Bytes good = read_bytes(file);
    {
      const GgufFile f = read_gguf(file);
      ASSERT_EQ(f.tensors.size(), 1u);
      EXPECT_EQ(f.tensors[0].dtype, t);
      ASSERT_EQ(f.tensors[0].nbytes, data.size());
      EXPECT_EQ(std::memcmp(f.tensors[0].data, data.data(), data.size()), 0);
    }
    const InfoAt info = info_at(good, "blk.0.ffn_down.weight", 2);
    Bytes b = good;
    poke<uint64_t>(b, info.ne0, static_cast<uint64_t>(cols - 16));
    expect_load_error(file, b, {"'blk.0.ffn_down.weight'", "multiple of " + std::to_string(dtype_block_elems(t))});
    // The writer pads the data section to its alignment: cut from the end of the tensor.
    const size_t data_end = good.size() - (kGgufDefaultAlignment - data.size() % kGgufDefaultAlignment) % kGgufDefaultAlignment;
    ASSERT_EQ(std::memcmp(good.data() + data_end - data.size(), data.data(), data.size()), 0);
    for (const size_t cut : {size_t{1}, dtype_block_bytes(t) / 2, dtype_block_bytes(t) + 1}) {
      b = Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(data_end - cut));
      expect_load_error(file, b, {"'blk.0.ffn_down.weight'"});
    }
  }
}

TEST_F(GgufTest, InMemoryParseMatchesFileParse) {
  const std::string file = path("mem.gguf");
  const Bytes b = sample_file(file);
  const GgufFile f = read_gguf(MappedFile::from_bytes("in-memory copy", b.data(), b.size()));
  EXPECT_EQ(f.file->path(), "in-memory copy");
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[2].name, "output_norm.weight");
  EXPECT_EQ(f.tensors[2].file, "in-memory copy");
  EXPECT_EQ(f.metadata.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "bc", "def"}));
  try {
    read_gguf(MappedFile::from_bytes("in-memory copy", b.data(), 100));
    ADD_FAILURE();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("in-memory copy"), std::string::npos);
  }
}

TEST_F(GgufTest, WriterRejectsMisuse) {
  const std::string file = path("misuse.gguf");
  GgufWriter w(file);
  w.add_u8("a", 1);
  EXPECT_THROW(w.add_u8("a", 2), std::logic_error);
  EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {2, 33}), std::invalid_argument);
  w.add_tensor("t", DType::F32, {2});
  EXPECT_THROW(w.add_tensor("t", DType::F32, {2}), std::logic_error);
  const float v[3] = {1, 2, 3};
  EXPECT_THROW(w.write_tensor_data(v, sizeof v), std::logic_error);
  EXPECT_THROW(w.add_u8("late", 1), std::logic_error);
  EXPECT_THROW(w.finish(), std::logic_error);
  EXPECT_THROW(GgufWriter(path("no/such/dir.gguf")), std::runtime_error);
}

}  // namespace
}  // namespace orzo
