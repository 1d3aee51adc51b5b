#include "core/read_file.hpp"

#include <fstream>
#include <sstream>

#include "core/load_error.hpp"

namespace orzo {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(path + ": cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace orzo
