#include "formats/gguf_writer.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace orzo {

GgufWriter::GgufWriter(std::string path, uint32_t alignment) : path_(std::move(path)), alignment_(alignment) {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
    throw std::invalid_argument("GGUF alignment must be a power of two");
  out_ = std::fopen(path_.c_str(), "wb");
  if (!out_) throw std::runtime_error(path_ + ": cannot create: " + std::strerror(errno));
  if (alignment_ != kGgufDefaultAlignment) add_u32("general.alignment", alignment_);
}

GgufWriter::~GgufWriter() {
  if (out_) std::fclose(out_);
}

void GgufWriter::begin_value(const std::string& key, GgufType type) {
  if (header_written_) throw std::logic_error(path_ + ": metadata '" + key + "' added after tensor data");
  if (!keys_.insert(key).second) throw std::logic_error(path_ + ": metadata key '" + key + "' added twice");
  put_string(key);
  put_u32(static_cast<uint32_t>(type));
  ++kv_count_;
}

void GgufWriter::put_string(const std::string& s) {
  put_u64(s.size());
  put_raw(s.data(), s.size());
}

void GgufWriter::add_u8(const std::string& key, uint8_t v) { begin_value(key, GgufType::U8); put_raw(&v, 1); }
void GgufWriter::add_i8(const std::string& key, int8_t v) { begin_value(key, GgufType::I8); put_raw(&v, 1); }
void GgufWriter::add_u16(const std::string& key, uint16_t v) { begin_value(key, GgufType::U16); put_raw(&v, 2); }
void GgufWriter::add_i16(const std::string& key, int16_t v) { begin_value(key, GgufType::I16); put_raw(&v, 2); }
void GgufWriter::add_u32(const std::string& key, uint32_t v) { begin_value(key, GgufType::U32); put_raw(&v, 4); }
void GgufWriter::add_i32(const std::string& key, int32_t v) { begin_value(key, GgufType::I32); put_raw(&v, 4); }
void GgufWriter::add_u64(const std::string& key, uint64_t v) { begin_value(key, GgufType::U64); put_raw(&v, 8); }
void GgufWriter::add_i64(const std::string& key, int64_t v) { begin_value(key, GgufType::I64); put_raw(&v, 8); }
void GgufWriter::add_f32(const std::string& key, float v) { begin_value(key, GgufType::F32); put_raw(&v, 4); }
void GgufWriter::add_f64(const std::string& key, double v) { begin_value(key, GgufType::F64); put_raw(&v, 8); }

void GgufWriter::add_bool(const std::string& key, bool v) {
  begin_value(key, GgufType::Bool);
  const uint8_t b = v ? 1 : 0;
  put_raw(&b, 1);
}

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  begin_value(key, GgufType::String);
  put_string(v);
}

void GgufWriter::add_raw(const std::string& key, const GgufRawValue& v) {
  begin_value(key, v.type);
  put_raw(v.bytes.data(), v.bytes.size());
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  begin_value(key, GgufType::Array);
  put_u32(static_cast<uint32_t>(GgufType::String));
  put_u64(v.size());
  for (const auto& s : v) put_string(s);
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  begin_value(key, GgufType::Array);
  put_u32(static_cast<uint32_t>(GgufType::I32));
  put_u64(v.size());
  put_raw(v.data(), v.size() * sizeof(int32_t));
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& v) {
  begin_value(key, GgufType::Array);
  put_u32(static_cast<uint32_t>(GgufType::F32));
  put_u64(v.size());
  put_raw(v.data(), v.size() * sizeof(float));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  if (header_written_) throw std::logic_error(path_ + ": tensor '" + name + "' added after tensor data");
  if (!tensor_names_.insert(name).second) throw std::logic_error(path_ + ": tensor '" + name + "' added twice");
  int64_t numel = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument(path_ + ": tensor '" + name + "' has a negative dim");
    numel *= d;
  }
  const int64_t cols = shape.empty() ? 1 : shape.back();
  if (cols % dtype_block_elems(dtype) != 0)
    throw std::invalid_argument(path_ + ": tensor '" + name + "' rows of " + std::to_string(cols) + " are not a multiple of " +
                                std::to_string(dtype_block_elems(dtype)) + ", as " + dtype_name(dtype) + " needs");
  const uint64_t nbytes = cols == 0 ? 0 : dtype_row_bytes(dtype, cols) * static_cast<uint64_t>(numel / cols);

  std::string& h = tensor_infos_;
  const auto put = [&h](const void* p, size_t n) { h.append(static_cast<const char*>(p), n); };
  const uint64_t name_len = name.size();
  put(&name_len, 8);
  put(name.data(), name.size());
  const auto n_dims = static_cast<uint32_t>(shape.size());
  put(&n_dims, 4);
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) {  // GGUF lists the innermost dim first
    const auto ne = static_cast<uint64_t>(*it);
    put(&ne, 8);
  }
  const uint32_t type = ggml_type_of(dtype);
  put(&type, 4);
  put(&next_offset_, 8);
  tensor_bytes_.push_back(nbytes);
  next_offset_ += (nbytes + alignment_ - 1) / alignment_ * alignment_;
}

void GgufWriter::write_bytes(const void* p, size_t n) {
  if (!out_) throw std::logic_error(path_ + ": written after finish()");
  if (n != 0 && std::fwrite(p, 1, n, out_) != n)
    throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
}

void GgufWriter::pad_to_alignment(uint64_t written) {
  static const char zeros[256] = {};
  uint64_t pad = (alignment_ - written % alignment_) % alignment_;
  while (pad > 0) {
    const size_t n = pad < sizeof zeros ? static_cast<size_t>(pad) : sizeof zeros;
    write_bytes(zeros, n);
    pad -= n;
  }
}

void GgufWriter::write_header() {
  std::string prefix("GGUF", 4);
  const uint32_t version = 3;
  const uint64_t tensor_count = tensor_bytes_.size();
  prefix.append(reinterpret_cast<const char*>(&version), 4);
  prefix.append(reinterpret_cast<const char*>(&tensor_count), 8);
  prefix.append(reinterpret_cast<const char*>(&kv_count_), 8);
  write_bytes(prefix.data(), prefix.size());
  write_bytes(header_.data(), header_.size());
  write_bytes(tensor_infos_.data(), tensor_infos_.size());
  pad_to_alignment(prefix.size() + header_.size() + tensor_infos_.size());
  header_written_ = true;
  header_.clear();
  header_.shrink_to_fit();
  tensor_infos_.clear();
  tensor_infos_.shrink_to_fit();
}

void GgufWriter::write_tensor_data(const void* data, size_t nbytes) {
  if (!header_written_) write_header();
  if (nbytes == 0) return;
  while (current_ < tensor_bytes_.size() && current_written_ == tensor_bytes_[current_]) ++current_;
  if (current_ >= tensor_bytes_.size() || nbytes > tensor_bytes_[current_] - current_written_)
    throw std::logic_error(path_ + ": more tensor data written than the tensors hold");
  write_bytes(data, nbytes);
  current_written_ += nbytes;
  if (current_written_ == tensor_bytes_[current_]) {
    pad_to_alignment(current_written_);
    ++current_;
    current_written_ = 0;
  }
}

void GgufWriter::finish() {
  if (!out_) throw std::logic_error(path_ + ": finish() called twice");
  if (!header_written_) write_header();
  while (current_ < tensor_bytes_.size() && tensor_bytes_[current_] == 0) ++current_;
  if (current_ != tensor_bytes_.size())
    throw std::logic_error(path_ + ": finish() before all tensor data was written");
  const int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
}

}  // namespace orzo
