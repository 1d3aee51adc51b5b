#include "server/http_server.hpp"

#include "server/api_error.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/parser.hpp>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <sys/socket.h>

namespace orzo {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(tcp::socket socket, const HttpServerOptions& options, const HttpHandler& handler,
                 net::thread_pool& work, std::atomic<size_t>& preparing, const std::atomic<bool>& draining)
      : stream_(std::move(socket)), deadline_(stream_.get_executor()), options_(options), handler_(handler),
        work_(work), preparing_(preparing), draining_(draining) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  // The exchange's operations, each run on the strand for exchange `id`: inline when the
  // caller is already there (a job answering from its strand saves a hop per token).
  template <class Op>
  void run(uint64_t id, Op op) {
    net::dispatch(stream_.get_executor(), [self = shared_from_this(), id, op = std::move(op)]() mutable {
      if (self->live(id)) op(*self);
    });
  }
  void post(std::function<void()> f) { net::post(stream_.get_executor(), std::move(f)); }

  void respond(int status, const std::string& body, const HttpHeaders& headers, const std::string& content_type) {
    if (record_) record_->status = status;
    std::string out = status_line(status);
    out += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
    out += keep_alive_ ? "\r\n" : "Connection: close\r\n\r\n";
    out += body;
    finishing_ = true;
    enqueue(std::move(out));
  }

  void start_stream(const std::string& content_type) {
    if (record_) record_->status = 200;
    std::string out = status_line(200);
    out += "Content-Type: " + content_type + "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    out += keep_alive_ ? "\r\n" : "Connection: close\r\n\r\n";
    streaming_ = true;
    enqueue(std::move(out));
  }

  void write_chunk(const std::string& data) {
    if (!streaming_ || data.empty()) return;
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    enqueue(size + data + "\r\n");
  }

  void finish_stream() {
    if (!streaming_) return;
    finishing_ = true;
    enqueue("0\r\n\r\n");
  }

  void set_on_disconnect(std::function<void()> callback) { on_disconnect_ = std::move(callback); }
  // The kernel's send buffer grows to megabytes by itself (autotuning) and would hide a reader
  // that stopped: a stream caps it at its window, which caps the server's memory per stalled
  // reader at about three windows (the kernel doubles what it is given).
  void set_on_backlog(std::function<void(bool)> callback) {
    on_backlog_ = std::move(callback);
    beast::error_code ignored;
    stream_.socket().set_option(net::socket_base::send_buffer_size(static_cast<int>(options_.stream_buffer_bytes)), ignored);
  }

  void set_generation(AccessRecord::Generation generation) {
    if (record_) record_->generation = std::move(generation);
  }

 private:
  bool live(uint64_t id) const { return in_exchange_ && id == exchange_id_ && !closed_ && !finishing_; }

  std::string status_line(int status) const {
    return "HTTP/1.1 " + std::to_string(status) + " " +
           std::string(http::obsolete_reason(static_cast<http::status>(status))) + "\r\nServer: orzo\r\n";
  }

  void read_header() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    arm_deadline();
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& req = parser_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto self = shared_from_this();
      auto line = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*line), [self, line](beast::error_code wec, size_t) {
        if (wec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  // Beast's own stream timeout closes the socket, which would leave no way to answer 408:
  // this deadline only cancels the read.
  void arm_deadline() {
    timed_out_ = false;
    deadline_.expires_after(options_.timeout);
    deadline_.async_wait([self = shared_from_this(), id = exchange_id_](beast::error_code ec) {
      if (ec || id != self->exchange_id_ || self->in_exchange_ || self->closed_) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit)
      return refuse(ApiError(413, "the request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes",
                             "invalid_request_error", {}, "request_too_large"));
    if (ec == http::error::header_limit)
      return refuse(ApiError(431, "the request's headers are too large"));
    if (timed_out_) {
      // A client that started a request and stalled hears why; a silent idle one is just closed.
      if (parser_ && parser_->got_some())
        return refuse(ApiError(408, "the request did not arrive within " +
                                        std::to_string(options_.timeout.count()) + " ms"));
      return close();
    }
    if (ec.category() == http::make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream)
      return refuse(ApiError(400, "malformed HTTP request: " + ec.message()));
    close();
  }

  // An error answered before any handler saw the request; the connection closes after it.
  void refuse(const ApiError& error) {
    // The request line may have parsed even when the headers did not (a body over the limit).
    begin_exchange(false, parser_ ? &parser_->get() : nullptr);
    respond(error.status, error_body(error), {}, "application/json");
  }

  void on_request(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto request = std::make_shared<HttpRequest>(parser_->release());
    begin_exchange(request->keep_alive(), request.get());
    watch_for_disconnect();
    auto exchange = std::make_shared<HttpExchange>(shared_from_this(), exchange_id_);
    // A body is the client's to size: parsing it, rendering a chat and tokenizing a prompt
    // take time in proportion, which must not hold up the other connections of this I/O
    // thread. Bodiless requests (health probes, metrics) answer here, at once.
    if (request->method() != http::verb::post) return handle(*request, exchange);
    ++preparing_;
    net::post(work_, [self = shared_from_this(), request, exchange] {
      self->handle(*request, exchange);
      --self->preparing_;
    });
  }

  void handle(HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange) {
    try {
      handler_(request, exchange);
    } catch (const ApiError& e) {
      exchange->respond(e.status, error_body(e));
    } catch (const std::exception& e) {
      exchange->respond(500, error_body(ApiError(500, e.what(), "server_error")));
    }
  }

  // `request`: as far as it parsed, if at all.
  void begin_exchange(bool keep_alive, const HttpRequest* request) {
    record_.reset();
    if (options_.access_log) {
      const auto known = [](std::string_view s) { return s.empty() ? std::string("-") : std::string(s); };
      const std::string_view method =
          request ? std::string_view(request->method_string().data(), request->method_string().size()) : "";
      const std::string_view target =
          request ? std::string_view(request->target().data(), request->target().size()) : "";
      record_.emplace();
      record_->method = known(method);
      record_->path = known(target.substr(0, target.find('?')));
      began_ = std::chrono::steady_clock::now();
    }
    ++exchange_id_;
    in_exchange_ = true;
    finishing_ = false;
    streaming_ = false;
    keep_alive_ = keep_alive && !draining_.load();
    deadline_.cancel();  // answers may take as long as generation takes
  }

  // A request is being answered, so the client has nothing to send (pipelining aside): the
  // socket turning readable means it closed, or reset. Waiting on it costs nothing per token.
  void watch_for_disconnect() {
    stream_.socket().async_wait(tcp::socket::wait_read,
                                [self = shared_from_this(), id = exchange_id_](beast::error_code ec) {
                                  if (ec || id != self->exchange_id_ || !self->in_exchange_ || self->closed_) return;
                                  char c;
                                  const auto n = ::recv(self->stream_.socket().native_handle(), &c, 1,
                                                        MSG_PEEK | MSG_DONTWAIT);
                                  if (n > 0) return;  // a pipelined request: read once this one is answered
                                  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                                    return self->watch_for_disconnect();
                                  self->client_gone();
                                });
  }

  void client_gone() {
    if (closed_) return;
    auto callback = std::move(on_disconnect_);
    on_disconnect_ = nullptr;
    if (in_exchange_) log_access();
    close();
    if (callback && in_exchange_) callback();
  }

  void enqueue(std::string data) {
    if (closed_) return;
    outbox_bytes_ += data.size();
    outbox_.push_back(std::move(data));
    if (!writing_) write_next();
    watch_backlog();
  }

  // A reader that falls stream_buffer_bytes behind is told to the exchange's owner (which
  // pauses generation) and told again once it has read all but a quarter of that; one that
  // stays behind for stalled_timeout is treated as gone.
  void watch_backlog() {
    if (!on_backlog_) return;
    const size_t backlog = outbox_bytes_ + (writing_ ? sending_.size() : 0);
    if (!stalled_ && backlog > options_.stream_buffer_bytes) {
      stalled_ = true;
      stall_timer_.expires_after(options_.stalled_timeout);
      stall_timer_.async_wait([self = shared_from_this(), id = exchange_id_](beast::error_code ec) {
        if (ec || !self->stalled_ || id != self->exchange_id_ || !self->in_exchange_) return;
        self->client_gone();
      });
      on_backlog_(true);
    } else if (stalled_ && backlog <= options_.stream_buffer_bytes / 4) {
      stalled_ = false;
      stall_timer_.cancel();
      on_backlog_(false);
    }
  }

  // Everything queued goes out in one write: under load many tokens share a syscall.
  void write_next() {
    if (outbox_.empty()) {
      if (finishing_) end_exchange();
      return;
    }
    writing_ = true;
    sending_.clear();
    for (auto& s : outbox_) sending_ += s;
    outbox_.clear();
    outbox_bytes_ = 0;
    net::async_write(stream_, net::buffer(sending_), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->client_gone();
      self->write_next();
      self->watch_backlog();
    });
  }

  void end_exchange() {
    log_access();
    in_exchange_ = false;
    on_disconnect_ = nullptr;
    on_backlog_ = nullptr;
    stalled_ = false;
    stall_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().cancel(ignored);  // the disconnect watch
    if (!keep_alive_) {
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return close();
    }
    read_header();
  }

  // The exchange's record goes out once, at its end.
  void log_access() {
    if (!record_) return;
    if (record_->status == 0) record_->status = kClientClosedRequest;
    record_->duration_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    options_.access_log(*record_);
    record_.reset();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    outbox_.clear();
    outbox_bytes_ = 0;
    stall_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    deadline_.cancel();
    stream_.close();
  }

  beast::tcp_stream stream_;
  net::steady_timer deadline_;
  bool timed_out_ = false;
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
  net::thread_pool& work_;
  std::atomic<size_t>& preparing_;
  const std::atomic<bool>& draining_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> outbox_;
  size_t outbox_bytes_ = 0;
  std::string sending_;
  bool writing_ = false;
  uint64_t exchange_id_ = 0;
  bool in_exchange_ = false;
  bool finishing_ = false;  // the answer is complete once the outbox drains
  bool streaming_ = false;
  bool keep_alive_ = false;
  bool closed_ = false;
  std::function<void()> on_disconnect_;
  std::function<void(bool)> on_backlog_;  // the exchange's owner, told when its reader falls behind
  bool stalled_ = false;
  net::steady_timer stall_timer_{stream_.get_executor()};
  std::optional<AccessRecord> record_;  // the exchange's, while one is open and there is a log
  std::chrono::steady_clock::time_point began_;
};

void HttpExchange::respond(int status, std::string body, HttpHeaders headers, std::string content_type) {
  connection_->run(id_, [body = std::move(body), headers = std::move(headers),
                         content_type = std::move(content_type), status](HttpConnection& c) mutable {
    c.respond(status, body, headers, content_type);
  });
}

void HttpExchange::start_stream(std::string content_type) {
  connection_->run(id_, [content_type = std::move(content_type)](HttpConnection& c) { c.start_stream(content_type); });
}

void HttpExchange::write(std::string data) {
  connection_->run(id_, [data = std::move(data)](HttpConnection& c) { c.write_chunk(data); });
}

void HttpExchange::finish() {
  connection_->run(id_, [](HttpConnection& c) { c.finish_stream(); });
}

void HttpExchange::on_disconnect(std::function<void()> callback) {
  connection_->run(id_, [callback = std::move(callback)](HttpConnection& c) mutable {
    c.set_on_disconnect(std::move(callback));
  });
}

void HttpExchange::on_backlog(std::function<void(bool stalled)> callback) {
  connection_->run(id_, [callback = std::move(callback)](HttpConnection& c) mutable {
    c.set_on_backlog(std::move(callback));
  });
}

void HttpExchange::report_generation(AccessRecord::Generation generation) {
  connection_->run(id_, [generation = std::move(generation)](HttpConnection& c) mutable {
    c.set_generation(std::move(generation));
  });
}

void HttpExchange::post(std::function<void()> f) { connection_->post(std::move(f)); }

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)),
      work_(static_cast<size_t>(std::max(1, options_.work_threads))),
      // Its own strand: with several I/O threads, stop_accepting's close would otherwise run
      // beside an accept handler on another thread, and an acceptor is not thread-safe.
      acceptor_(net::make_strand(context_)) {
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  beast::error_code ec;
  const auto address = net::ip::make_address(options_.host, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": '" + options_.host + "' is not an IP address");
  const tcp::endpoint endpoint{address, options_.port};
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + where + ": " + ec.message());
  port_ = acceptor_.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  accept();
  for (int i = 0; i < std::max(1, options_.threads); ++i) threads_.emplace_back([this] { context_.run(); });
}

void HttpServer::accept() {
  acceptor_.async_accept(net::make_strand(context_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<HttpConnection>(std::move(socket), options_, handler_, work_, preparing_, draining_)->start();
    }
    accept();
  });
}

void HttpServer::stop_accepting() {
  draining_ = true;
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
  });
}

void HttpServer::stop() {
  work_.stop();
  work_.join();
  context_.stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

}  // namespace orzo
