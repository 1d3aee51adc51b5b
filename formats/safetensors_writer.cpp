#include "formats/safetensors_writer.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace orzo {

SafetensorsWriter::SafetensorsWriter(std::string path) : path_(std::move(path)) {
  out_ = std::fopen(path_.c_str(), "wb");
  if (!out_) throw std::runtime_error(path_ + ": cannot create: " + std::strerror(errno));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_) std::fclose(out_);
}

void SafetensorsWriter::add_metadata(const std::string& key, const std::string& value) {
  if (header_written_) throw std::logic_error(path_ + ": metadata '" + key + "' added after tensor data");
  header_["__metadata__"][key] = value;
}

void SafetensorsWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  if (header_written_) throw std::logic_error(path_ + ": tensor '" + name + "' added after tensor data");
  if (name == "__metadata__" || !names_.insert(name).second)
    throw std::logic_error(path_ + ": tensor name '" + name + "' is taken");
  if (dtype_is_quantized(dtype))
    throw std::invalid_argument(path_ + ": safetensors cannot store " + dtype_name(dtype) + " tensor '" + name + "'");
  uint64_t numel = 1;
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument(path_ + ": tensor '" + name + "' has a negative dim");
    numel *= static_cast<uint64_t>(d);
  }
  const uint64_t nbytes = numel * dtype_row_bytes(dtype, 1);
  header_[name] = {{"dtype", dtype_name(dtype)}, {"shape", shape}, {"data_offsets", {next_offset_, next_offset_ + nbytes}}};
  tensor_bytes_.push_back(nbytes);
  next_offset_ += nbytes;
}

void SafetensorsWriter::write_bytes(const void* p, size_t n) {
  if (!out_) throw std::logic_error(path_ + ": written after finish()");
  if (n != 0 && std::fwrite(p, 1, n, out_) != n)
    throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
}

void SafetensorsWriter::write_header() {
  std::string json = header_.dump();
  // Padding the header keeps the data 8-byte aligned in the file, and so in a mapping.
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t len = json.size();
  write_bytes(&len, 8);
  write_bytes(json.data(), json.size());
  header_written_ = true;
  header_ = nullptr;
}

void SafetensorsWriter::write_tensor_data(const void* data, size_t nbytes) {
  if (!header_written_) write_header();
  if (nbytes == 0) return;
  while (current_ < tensor_bytes_.size() && current_written_ == tensor_bytes_[current_]) {
    ++current_;
    current_written_ = 0;
  }
  if (current_ >= tensor_bytes_.size() || nbytes > tensor_bytes_[current_] - current_written_)
    throw std::logic_error(path_ + ": more tensor data written than the tensors hold");
  write_bytes(data, nbytes);
  current_written_ += nbytes;
}

void SafetensorsWriter::finish() {
  if (!out_) throw std::logic_error(path_ + ": finish() called twice");
  if (!header_written_) write_header();
  while (current_ < tensor_bytes_.size() && current_written_ == tensor_bytes_[current_]) {
    ++current_;
    current_written_ = 0;
  }
  if (current_ != tensor_bytes_.size())
    throw std::logic_error(path_ + ": finish() before all tensor data was written");
  const int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
}

}  // namespace orzo
