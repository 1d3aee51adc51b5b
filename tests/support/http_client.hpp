#pragma once
// A raw-socket HTTP client for tests that check the bytes on the wire.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace orzo::testing {

using namespace std::chrono_literals;

class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ADD_FAILURE() << "connect failed";
  }
  ~Client() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& data) { ASSERT_EQ(::send(fd_, data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(data.size())); }
  // Reads until `until` has arrived (returns everything up to and including it), the peer
  // closes, or the deadline passes.
  std::string read_until(const std::string& until, std::chrono::milliseconds deadline = 3000ms) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (true) {
      if (auto at = buffer_.find(until); at != std::string::npos) {
        std::string out = buffer_.substr(0, at + until.size());
        buffer_.erase(0, at + until.size());
        return out;
      }
      if (!fill(end)) {
        std::string out = std::move(buffer_);
        buffer_.clear();
        return out;
      }
    }
  }
  // One whole response with a Content-Length body.
  std::string response() {
    std::string head = read_until("\r\n\r\n");
    const auto at = head.find("Content-Length: ");
    if (at == std::string::npos) return head;
    const size_t length = std::stoul(head.substr(at + 16));
    const auto end = std::chrono::steady_clock::now() + 3000ms;
    while (buffer_.size() < length && fill(end)) {
    }
    head += buffer_.substr(0, length);
    buffer_.erase(0, std::min(length, buffer_.size()));
    return head;
  }
  bool closed_by_peer(std::chrono::milliseconds deadline = 3000ms) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (fill(end)) {
    }
    return eof_;
  }

 private:
  bool fill(std::chrono::steady_clock::time_point end) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0 || eof_) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

inline std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

inline std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"; }

}  // namespace orzo::testing
