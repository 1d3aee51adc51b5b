#pragma once
// The HTTP/1.1 side of `orzo serve`, on Boost.Beast: an acceptor and one connection object
// per client, each on its own strand. A connection reads one request at a time (keep-alive,
// a size limit on bodies, a deadline on slow or silent clients), hands it to the handler
// with an HttpExchange — a request with a body on a small pool of work threads, since
// preparing a large one takes time that must not hold up the other connections of an I/O
// thread — and writes whatever the exchange is given, in order, as one whole
// response or as a chunked stream. While an answer is being produced the connection
// watches the socket, so a client that goes away is noticed at once, not at the next write.
// Each request answered, or left by its client, becomes one AccessRecord for the access log.

#include "server/access_log.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace orzo {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

class HttpConnection;

// One request's answer. Every method may be called from any thread; the work runs on the
// connection's strand (at once, when called from it), in each thread's call order. Calls after the answer is finished, or after the
// client went away, do nothing.
class HttpExchange {
 public:
  HttpExchange(std::shared_ptr<HttpConnection> connection, uint64_t id)
      : connection_(std::move(connection)), id_(id) {}

  // A whole response with Content-Length; ends the exchange.
  void respond(int status, std::string body, HttpHeaders headers = {},
               std::string content_type = "application/json");
  // A 200 response whose body follows in pieces (chunked transfer encoding).
  void start_stream(std::string content_type = "text/event-stream");
  void write(std::string data);
  void finish();  // the stream's last chunk; ends the exchange
  // Called once, on the strand, if the client disconnects before the exchange ends.
  void on_disconnect(std::function<void()> callback);
  // Called on the strand with true when the client has fallen stream_buffer_bytes behind what
  // was written to it, and with false once it has caught up to a quarter of that; a client
  // that stays behind for stalled_timeout counts as gone (on_disconnect). Without it, an
  // exchange buffers whatever it is given, for as long as the client takes.
  void on_backlog(std::function<void(bool stalled)> callback);
  // What a generation request adds to its access-log record; call before the answer ends.
  void report_generation(AccessRecord::Generation generation);
  // Runs `f` on the strand: the one place an exchange's owner may keep unsynchronized state.
  void post(std::function<void()> f);

 private:
  std::shared_ptr<HttpConnection> connection_;
  uint64_t id_;
};

using HttpHandler = std::function<void(HttpRequest& request, std::shared_ptr<HttpExchange> exchange)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                                 // 0: any free port (see HttpServer::port)
  int threads = 1;                                      // I/O threads
  int work_threads = 2;                                 // threads that run the handler of requests with a body
  uint64_t max_body_bytes = uint64_t{8} << 20;          // larger bodies get 413
  std::chrono::milliseconds timeout{30000};             // a request must arrive whole within this,
                                                        // and an idle keep-alive connection closes after it
  size_t stream_buffer_bytes = 64 << 10;                // HttpExchange::on_backlog's window
  std::chrono::milliseconds stalled_timeout{60000};     // and how long a reader may stay behind it
  // Called once per request, on its connection's strand, when its answer is written or its
  // client left (status kClientClosedRequest if no status line went out); empty: no log.
  std::function<void(const AccessRecord&)> access_log;
};

class HttpServer {
 public:
  // Binds and listens; throws std::runtime_error naming the address when it cannot.
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // Requests whose handler is queued or running on a work thread: not yet in anyone's count
  // of requests in flight, so a graceful stop waits for them too.
  size_t preparing() const { return preparing_.load(); }
  boost::asio::io_context& context() { return context_; }

  void start();            // accepts on `threads` threads; returns at once
  // Stops accepting; responses from here on close their connection after they are sent.
  void stop_accepting();
  void stop();             // stops the I/O threads (in-flight exchanges are dropped) and joins them

 private:
  void accept();

  HttpServerOptions options_;
  HttpHandler handler_;
  boost::asio::thread_pool work_;
  boost::asio::io_context context_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<size_t> preparing_{0};
  std::vector<std::thread> threads_;
};

}  // namespace orzo
