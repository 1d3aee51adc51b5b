// The safetensors reader on the stories260K HF copy, writer -> reader round trips, sharded
// directories, and damaged files: each must fail with a LoadError that names the file (and
// the tensor), never crash or attempt a huge allocation. MappedFile's own errors are here
// too, since every reader opens files through it.
#include "formats/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/load_error.hpp"
#include "core/mapped_file.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors_writer.hpp"
#include "tests/support/temp_dir.hpp"

namespace orzo {
namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(ORZO_SHARED_DIR) + "/models/stories260K";

using testing::Bytes;

using SafetensorsTest = testing::TempDirTest;

using testing::write_bytes;

// A file from a literal header and `data_bytes` bytes of data.
Bytes make_file(const std::string& header, size_t data_bytes, uint64_t header_len_field = 0) {
  Bytes b(8);
  uint64_t len = header_len_field ? header_len_field : header.size();
  std::memcpy(b.data(), &len, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0x3c);
  return b;
}

template <typename F>
void expect_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << needles.front();
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

void expect_load_error(const std::string& file, const Bytes& b, std::vector<std::string> needles) {
  write_bytes(file, b);
  needles.insert(needles.begin(), file);
  expect_error([&] { read_safetensors(file); }, needles);
}

TEST(SafetensorsStories260K, TensorsMatchTheGgufCopy) {
  const std::string file = kStories + "/hf/model.safetensors";
  const SafetensorsFile f = read_safetensors(file);
  ASSERT_EQ(f.tensors.size(), 47u);  // 5 layers x 9, embedding, final norm; tied, so no lm_head
  std::map<std::string, const TensorView*> by_name;
  const uint8_t* previous_end = nullptr;
  for (const auto& t : f.tensors) {
    EXPECT_EQ(t.dtype, DType::F32) << t.name;
    EXPECT_EQ(t.file, file);
    EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel()) * 4) << t.name;
    if (previous_end) {
      EXPECT_EQ(static_cast<const uint8_t*>(t.data), previous_end) << "not in data order";
    }
    previous_end = static_cast<const uint8_t*>(t.data) + t.nbytes;
    by_name[t.name] = &t;
  }
  EXPECT_EQ(previous_end, f.file->data() + f.file->size());
  EXPECT_FALSE(by_name.count("lm_head.weight"));
  const auto shape = [&](const std::string& name) {
    EXPECT_TRUE(by_name.count(name)) << name;
    return by_name.count(name) ? by_name[name]->shape : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape("model.embed_tokens.weight"), (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(shape("model.norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape("model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape("model.layers.4.self_attn.k_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape("model.layers.1.self_attn.v_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape("model.layers.2.mlp.gate_proj.weight"), (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(shape("model.layers.2.mlp.down_proj.weight"), (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(shape("model.layers.3.post_attention_layernorm.weight"), (std::vector<int64_t>{64}));

  // Both copies come from one checkpoint; tensors that the HF conversion leaves unpermuted
  // must be bit-identical.
  const GgufFile g = read_gguf(kStories + "/stories260K.gguf");
  std::map<std::string, const TensorView*> gguf_by_name;
  for (const auto& t : g.tensors) gguf_by_name[t.name] = &t;
  for (const auto& [hf, gg] : std::map<std::string, std::string>{
           {"model.embed_tokens.weight", "token_embd.weight"},
           {"model.layers.1.self_attn.v_proj.weight", "blk.1.attn_v.weight"},
           {"model.layers.4.mlp.down_proj.weight", "blk.4.ffn_down.weight"},
           {"model.norm.weight", "output_norm.weight"}}) {
    ASSERT_TRUE(gguf_by_name.count(gg) && by_name.count(hf)) << hf;
    ASSERT_EQ(by_name[hf]->nbytes, gguf_by_name[gg]->nbytes) << hf;
    EXPECT_EQ(std::memcmp(by_name[hf]->data, gguf_by_name[gg]->data, by_name[hf]->nbytes), 0) << hf;
  }
}

TEST(SafetensorsStories260K, DirectoryWithOneFile) {
  const auto files = read_safetensors_dir(kStories + "/hf");
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].file->path(), kStories + "/hf/model.safetensors");
  EXPECT_EQ(files[0].tensors.size(), 47u);
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  return v;
}

// Values of a tensor, stored as `t`.
Bytes encode(DType t, size_t n) {
  const auto v = ramp(n);
  Bytes out(n * dtype_row_bytes(t, 1));
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeAndShape) {
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {"a.f32", DType::F32, {3, 5}},  {"b.f16", DType::F16, {7}},      {"c.bf16", DType::BF16, {2, 3, 4}},
      {"d.scalar", DType::F32, {}},   {"e.empty", DType::BF16, {0, 4}}, {"f.f16", DType::F16, {1, 1, 1, 3}},
  };
  const std::string file = path("model.safetensors");
  std::vector<Bytes> data;
  {
    SafetensorsWriter w(file);
    w.add_metadata("format", "pt");
    for (const auto& c : cases) w.add_tensor(c.name, c.dtype, c.shape);
    for (const auto& c : cases) {
      int64_t numel = 1;
      for (auto d : c.shape) numel *= d;
      data.push_back(encode(c.dtype, static_cast<size_t>(numel)));
      const size_t third = data.back().size() / 3;
      w.write_tensor_data(data.back().data(), third);
      w.write_tensor_data(data.back().data() + third, data.back().size() - third);
    }
    w.finish();
  }
  const SafetensorsFile f = read_safetensors(file);
  ASSERT_EQ(f.tensors.size(), cases.size());
  std::map<std::string, const TensorView*> by_name;
  for (const auto& t : f.tensors) by_name[t.name] = &t;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(by_name.count(cases[i].name)) << cases[i].name;
    const TensorView& t = *by_name[cases[i].name];
    EXPECT_EQ(t.dtype, cases[i].dtype) << t.name;
    EXPECT_EQ(t.shape, cases[i].shape) << t.name;
    ASSERT_EQ(t.nbytes, data[i].size()) << t.name;
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(t.data, data[i].data(), t.nbytes), 0) << t.name;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 2, 0u) << "header is padded to 8 bytes";
    }
  }
  EXPECT_EQ(f.tensors.front().name, "a.f32") << "tensors come in data order";
}

TEST_F(SafetensorsTest, WriterRejectsMisuse) {
  SafetensorsWriter w(path("misuse.safetensors"));
  EXPECT_THROW(w.add_tensor("q", DType::Q8_0, {1, 32}), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("__metadata__", DType::F32, {1}), std::logic_error);
  w.add_tensor("t", DType::F32, {2});
  EXPECT_THROW(w.add_tensor("t", DType::F32, {2}), std::logic_error);
  const float v[3] = {1, 2, 3};
  EXPECT_THROW(w.write_tensor_data(v, sizeof v), std::logic_error);
  EXPECT_THROW(w.add_metadata("late", "x"), std::logic_error);
  EXPECT_THROW(w.finish(), std::logic_error);
  EXPECT_THROW(SafetensorsWriter(path("no/such/dir.safetensors")), std::runtime_error);
}

// Writes one shard holding `names` (F32 [2] each).
void write_shard(const std::string& file, const std::vector<std::string>& names) {
  SafetensorsWriter w(file);
  for (const auto& n : names) w.add_tensor(n, DType::F32, {2});
  const float v[2] = {1.0f, 2.0f};
  for (size_t i = 0; i < names.size(); ++i) w.write_tensor_data(v, sizeof v);
  w.finish();
}

void write_index(const std::string& dir, const std::string& weight_map) {
  std::ofstream(dir + "/model.safetensors.index.json") << R"({"metadata": {"total_size": 24}, "weight_map": )"
                                                       << weight_map << "}";
}

TEST_F(SafetensorsTest, ShardedDirectory) {
  const std::string dir = dir_.string();
  write_shard(path("model-00001-of-00002.safetensors"), {"a", "b"});
  write_shard(path("model-00002-of-00002.safetensors"), {"c"});
  write_index(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors",
                       "b": "model-00001-of-00002.safetensors"})");
  const auto files = read_safetensors_dir(dir);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].tensors.size(), 2u);
  EXPECT_EQ(files[1].tensors.size(), 1u);
  EXPECT_EQ(files[1].tensors[0].name, "c");
  EXPECT_EQ(files[1].tensors[0].file, path("model-00002-of-00002.safetensors"));

  write_index(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"})");
  expect_error([&] { read_safetensors_dir(dir); }, {"model.safetensors.index.json", "'c'", "model-00001-of-00002"});

  write_index(dir, R"({"a": "../elsewhere.safetensors"})");
  expect_error([&] { read_safetensors_dir(dir); }, {"model.safetensors.index.json", "'a'", "not a file name"});

  write_index(dir, R"({"a": "missing.safetensors"})");
  expect_error([&] { read_safetensors_dir(dir); }, {path("missing.safetensors"), "No such file"});

  write_shard(path("model-00002-of-00002.safetensors"), {"a"});
  write_index(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})");
  expect_error([&] { read_safetensors_dir(dir); }, {"'a'", "both"});

  write_index(dir, R"(["not", "an", "object"])");
  expect_error([&] { read_safetensors_dir(dir); }, {"model.safetensors.index.json", "weight_map"});
  std::ofstream(dir + "/model.safetensors.index.json") << "{broken";
  expect_error([&] { read_safetensors_dir(dir); }, {"model.safetensors.index.json", "JSON"});

  expect_error([&] { read_safetensors_dir(path("nowhere")); }, {path("nowhere"), "no model.safetensors"});
}

constexpr const char* kGoodHeader =
    R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
    R"("n":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})";

TEST_F(SafetensorsTest, EveryTruncationIsALoadError) {
  const std::string file = path("trunc.safetensors");
  const Bytes full = make_file(kGoodHeader, 32);
  write_bytes(file, full);
  ASSERT_EQ(read_safetensors(file).tensors.size(), 2u);
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    expect_load_error(file, Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)), {});
  }
}

TEST_F(SafetensorsTest, DamagedHeadersNameFileAndTensor) {
  const std::string file = path("bad.safetensors");
  const std::string h = kGoodHeader;
  expect_load_error(file, make_file(h, 32, 1ull << 63), {"header length"});
  expect_load_error(file, make_file(h, 32, std::numeric_limits<uint64_t>::max()), {"header length"});
  expect_load_error(file, make_file(h, 32, 200u << 20), {"100 MiB"});
  expect_load_error(file, make_file(h, 32, h.size() + 33), {"header length", "runs past"});
  expect_load_error(file, make_file(h.substr(0, h.size() - 1), 33), {"JSON"});
  expect_load_error(file, make_file("[1, 2]", 0), {"not a JSON object"});
  expect_load_error(file, make_file(std::string("{\"w\":\0}", 7), 0), {"JSON"});

  const auto with = [&](const std::string& w_entry) {
    return make_file(R"({"w":)" + w_entry + R"(,"n":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})", 32);
  };
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,240]})"), {"'w'", "data_offsets"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3],"data_offsets":[24,0]})"), {"'w'", "data_offsets"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3],"data_offsets":[18446744073709551615,24]})"),
                    {"'w'"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3],"data_offsets":[8,32]})"),
                    {"'w'", "'n'", "overlap"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,24]})"), {"'w'", "needs 16"});
  expect_load_error(file, with(R"({"dtype":"F64","shape":[3],"data_offsets":[0,24]})"), {"'w'", "'F64'"});
  expect_load_error(file, with(R"({"dtype":"I8","shape":[24],"data_offsets":[0,24]})"), {"'w'", "'I8'"});
  expect_load_error(file, with(R"({"dtype":"f32","shape":[6],"data_offsets":[0,24]})"), {"'w'", "'f32'"});
  expect_load_error(file, with(R"({"dtype":7,"shape":[6],"data_offsets":[0,24]})"), {"'w'", "dtype"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[-6],"data_offsets":[0,24]})"), {"'w'", "shape"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[6.0],"data_offsets":[0,24]})"), {"'w'", "shape"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":6,"data_offsets":[0,24]})"), {"'w'", "shape"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24]})"),
                    {"'w'", "too many"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,24]})"),
                    {"'w'", "too many"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,24]})"),
                    {"'w'", "too many"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3]})"), {"'w'", "data_offsets"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0]})"), {"'w'", "data_offsets"});
  expect_load_error(file, with(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,-24]})"), {"'w'", "data_offsets"});
  expect_load_error(file, with(R"("F32")"), {"'w'", "not an object"});
  expect_load_error(file, make_file(R"({"n":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},)"
                                    R"("n":{"dtype":"BF16","shape":[4],"data_offsets":[8,16]}})",
                                    16),
                    {"'n'", "twice"});
  expect_load_error(file, make_file(R"({"__metadata__":[1]})", 0), {"__metadata__"});
  expect_load_error(file, make_file(R"({"__metadata__":{"format":1}})", 0), {"__metadata__", "'format'"});
}

TEST_F(SafetensorsTest, InMemoryParse) {
  const Bytes b = make_file(kGoodHeader, 32);
  const SafetensorsFile f = read_safetensors(MappedFile::from_bytes("memory", b.data(), b.size()));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "w");
  EXPECT_EQ(f.tensors[0].file, "memory");
  EXPECT_EQ(f.tensors[1].shape, (std::vector<int64_t>{4}));
  expect_error([&] { read_safetensors(MappedFile::from_bytes("memory", b.data(), 20)); }, {"memory"});
}

TEST_F(SafetensorsTest, MappedFileErrorsNameThePath) {
  const std::string missing = path("missing");
  expect_error([&] { MappedFile::open(missing); }, {missing, "No such file"});
  expect_error([&] { MappedFile::open(dir_.string()); }, {dir_.string(), "Is a directory"});
  write_bytes(path("empty"), {});
  const auto empty = MappedFile::open(path("empty"));
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_EQ(empty->path(), path("empty"));
  expect_load_error(path("empty"), {}, {"too short"});
  write_bytes(path("three"), {1, 2, 3});
  const auto three = MappedFile::open(path("three"));
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ(three->data()[2], 3);
}

}  // namespace
}  // namespace orzo
