#include "kernels/cuda_cpu/block.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda_cpu/fiber.hpp"

namespace orzo::cuda_cpu {

namespace {

constexpr unsigned char kPoison = 0xff;  // NaN as a float, -1 as an integer

enum class Wait : uint8_t { ready, barrier, collective, done };

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync: return "__syncwarp";
    case WarpOp::shfl: return "__shfl_sync";
    case WarpOp::shfl_up: return "__shfl_up_sync";
    case WarpOp::shfl_down: return "__shfl_down_sync";
    case WarpOp::shfl_xor: return "__shfl_xor_sync";
    case WarpOp::ballot: return "__ballot_sync";
    case WarpOp::match_any: return "__match_any_sync";
    case WarpOp::any: return "__any_sync";
    case WarpOp::all: return "__all_sync";
  }
  return "?";
}

std::string site(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

bool same_site(const char* a_file, int a_line, const char* b_file, int b_line) {
  return a_line == b_line && (a_file == b_file || std::strcmp(a_file, b_file) == 0);
}

struct Lane {
  Fiber fiber;
  ThreadPlace place{};
  int index = 0;
  Wait wait = Wait::ready;
  const char* file = "";  // where it waits
  int line = 0;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int arg = 0, width = kWarpSize;
};

// The shuffles' random numbers: xorshift64*, seeded per launch. Cheap, since a block draws
// one per thread at every barrier and collective.
class OrderRng {
 public:
  explicit OrderRng(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  uint32_t below(uint32_t n) {  // uniform enough in [0, n) for an order
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    const auto r = static_cast<uint32_t>((state_ * 0x2545f4914f6cdd1dull) >> 32);
    return static_cast<uint32_t>((uint64_t{r} * n) >> 32);
  }

 private:
  uint64_t state_;
};

struct SharedDeclaration {
  const char* key;
  size_t offset;
};

// The block being run on this host thread, and every fiber it has made so far (reused).
class BlockRunner {
 public:
  BlockRunner()
      : static_shared_(static_cast<unsigned char*>(std::aligned_alloc(256, kStaticSharedBytes))),
        dynamic_shared_(static_cast<unsigned char*>(std::aligned_alloc(256, kMaxSharedBytes))) {}
  ~BlockRunner() {
    std::free(static_shared_);
    std::free(dynamic_shared_);
  }

  std::string run(const Grid& g, uint3 block_idx, OrderRng& rng, ThreadOrder order);

  Lane& current() { return *lanes_[static_cast<size_t>(current_)]; }
  void fault(const std::string& what) {
    if (fault_.empty()) {
      const uint3 t = current().place.thread_idx;
      fault_ = "thread (" + std::to_string(t.x) + "," + std::to_string(t.y) + "," + std::to_string(t.z) + "): " + what;
    }
  }
  bool faulted() const { return !fault_.empty(); }
  void* shared_declaration(const char* key, size_t bytes, size_t align);
  void* dynamic_shared() { return dynamic_shared_; }
  // The lanes of the caller's warp that had not exited when this run of lanes began: those
  // run one after another here, but side by side on a GPU.
  unsigned active_mask() const { return alive_at_batch_[static_cast<size_t>(current_ / kWarpSize)]; }
  const std::function<void()>* body() const { return body_; }

 private:
  void complete_collective(int index);
  std::string describe_deadlock() const;

  std::vector<std::unique_ptr<Lane>> lanes_;
  int n_ = 0, current_ = 0, running_ = 0, at_barrier_ = 0;
  std::vector<int> ready_, batch_;
  std::vector<unsigned> parked_;  // per warp: its lanes waiting at a collective
  std::vector<unsigned> alive_, alive_at_batch_;  // per warp: its lanes not exited (when the batch began)
  std::string fault_;
  const std::function<void()>* body_ = nullptr;
  unsigned char* static_shared_;
  unsigned char* dynamic_shared_;
  size_t static_used_ = 0, dynamic_bytes_ = 0;
  std::vector<SharedDeclaration> declarations_;
};

thread_local std::unique_ptr<BlockRunner> runner;

void lane_main(void* arg) {
  auto* lane = static_cast<Lane*>(arg);
  lane->fiber.begin();
  try {
    (*runner->body())();
  } catch (const std::exception& e) {
    runner->fault(std::string("an exception escaped the kernel: ") + e.what());
  } catch (...) {
    runner->fault("an exception escaped the kernel");
  }
  lane->wait = Wait::done;
  lane->fiber.finish();
}

void order_batch(std::vector<int>& batch, OrderRng& rng, ThreadOrder order) {
  if (order == ThreadOrder::shuffle) {
    for (size_t i = batch.size(); i > 1; --i) std::swap(batch[i - 1], batch[rng.below(static_cast<uint32_t>(i))]);
  }
  else if (order == ThreadOrder::reverse)
    std::reverse(batch.begin(), batch.end());
}

std::string BlockRunner::run(const Grid& g, uint3 block_idx, OrderRng& rng, ThreadOrder order) {
  n_ = static_cast<int>(g.block.x * g.block.y * g.block.z);
  while (static_cast<int>(lanes_.size()) < n_) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->index = static_cast<int>(lanes_.size()) - 1;
  }
  body_ = &g.body;
  fault_.clear();
  static_used_ = 0;
  declarations_.clear();
  dynamic_bytes_ = g.dynamic_shared;
  std::memset(dynamic_shared_, kPoison, dynamic_bytes_);
  parked_.assign(static_cast<size_t>((n_ + kWarpSize - 1) / kWarpSize), 0u);
  alive_.assign(parked_.size(), 0u);
  for (int i = 0; i < n_; ++i) alive_[static_cast<size_t>(i / kWarpSize)] |= 1u << (i % kWarpSize);
  running_ = n_;
  at_barrier_ = 0;
  ready_.clear();
  for (int i = 0; i < n_; ++i) {
    Lane& lane = *lanes_[static_cast<size_t>(i)];
    const auto u = static_cast<unsigned>(i);
    lane.place = {{u % g.block.x, u / g.block.x % g.block.y, u / (g.block.x * g.block.y)}, block_idx, g.block, g.grid};
    lane.wait = Wait::ready;
    lane.fiber.start(&lane_main, &lane);
    ready_.push_back(i);
  }
  while (running_ > 0) {
    if (ready_.empty()) {
      if (at_barrier_ != running_) return describe_deadlock();
      const Lane* first = nullptr;
      for (int i = 0; i < n_; ++i) {
        Lane& lane = *lanes_[static_cast<size_t>(i)];
        if (lane.wait != Wait::barrier) continue;
        if (!first) {
          first = &lane;
        } else if (!same_site(first->file, first->line, lane.file, lane.line)) {
          return "threads meet at different __syncthreads: " + site(first->file, first->line) + " and " +
                 site(lane.file, lane.line);
        }
        lane.wait = Wait::ready;
        ready_.push_back(i);
      }
      at_barrier_ = 0;
    }
    batch_.swap(ready_);
    ready_.clear();
    order_batch(batch_, rng, order);
    alive_at_batch_ = alive_;
    for (int i : batch_) {
      current_ = i;
      Lane& lane = *lanes_[static_cast<size_t>(i)];
      current_place = &lane.place;
      lane.fiber.resume();
      if (faulted()) return fault_;
      if (lane.wait == Wait::done) {
        --running_;
        alive_[static_cast<size_t>(i / kWarpSize)] &= ~(1u << (i % kWarpSize));
      } else if (lane.wait == Wait::barrier) {
        ++at_barrier_;
      } else {
        complete_collective(i);
      }
      if (faulted()) return fault_;
    }
  }
  return "";
}

// A collective completes when every lane of its mask waits at one: the same one, with the
// same mask, else the kernel has a bug CUDA leaves undefined.
void BlockRunner::complete_collective(int index) {
  Lane& me = *lanes_[static_cast<size_t>(index)];
  const int warp = index / kWarpSize, first = warp * kWarpSize;
  const unsigned bit = 1u << (index % kWarpSize), mask = me.mask;
  if (!(mask & bit)) return fault(std::string(op_name(me.op)) + " at " + site(me.file, me.line) +
                                  ": the mask leaves out the calling lane");
  if (me.width < 1 || me.width > kWarpSize || (me.width & (me.width - 1)) != 0)
    return fault(std::string(op_name(me.op)) + " at " + site(me.file, me.line) + ": width " +
                 std::to_string(me.width) + " is not a power of two up to 32");
  parked_[static_cast<size_t>(warp)] |= bit;
  if ((parked_[static_cast<size_t>(warp)] & mask) != mask) return;
  for (unsigned rest = mask; rest; rest &= rest - 1) {
    const Lane& other = *lanes_[static_cast<size_t>(first + __builtin_ctz(rest))];
    if (other.op != me.op || other.mask != mask || !same_site(other.file, other.line, me.file, me.line))
      return fault("lanes of warp " + std::to_string(warp) + " meet at different collectives: " + op_name(me.op) +
                   " at " + site(me.file, me.line) + " and " + op_name(other.op) + " at " +
                   site(other.file, other.line));
  }
  const auto lane_at = [&](int l) -> Lane& { return *lanes_[static_cast<size_t>(first + l)]; };
  for (unsigned rest = mask; rest; rest &= rest - 1) {
    const int l = __builtin_ctz(rest);
    Lane& lane = lane_at(l);
    const int width = lane.width, base = l & ~(width - 1);
    int source = l;
    switch (lane.op) {
      case WarpOp::sync: lane.result = 0; break;
      case WarpOp::shfl: source = base + ((lane.arg % width) + width) % width; break;
      case WarpOp::shfl_up: source = (l - base) >= lane.arg ? l - lane.arg : l; break;
      case WarpOp::shfl_down: source = (l - base) + lane.arg < width ? l + lane.arg : l; break;
      case WarpOp::shfl_xor: {
        // A lane may read an earlier group of `width`, not a later one (its own value then).
        const int x = l ^ lane.arg;
        source = x >= base + width ? l : x;
        break;
      }
      case WarpOp::ballot:
      case WarpOp::any:
      case WarpOp::all: {
        unsigned votes = 0;
        for (unsigned r = mask; r; r &= r - 1)
          if (lane_at(__builtin_ctz(r)).value) votes |= 1u << __builtin_ctz(r);
        lane.result = lane.op == WarpOp::ballot ? votes : lane.op == WarpOp::any ? votes != 0 : votes == mask;
        break;
      }
      case WarpOp::match_any: {
        unsigned peers = 0;
        for (unsigned r = mask; r; r &= r - 1)
          if (lane_at(__builtin_ctz(r)).value == lane.value) peers |= 1u << __builtin_ctz(r);
        lane.result = peers;
        break;
      }
    }
    if (lane.op == WarpOp::shfl || lane.op == WarpOp::shfl_up || lane.op == WarpOp::shfl_down ||
        lane.op == WarpOp::shfl_xor) {
      if (source < 0 || source >= kWarpSize || !(mask & (1u << source)))
        return fault(std::string(op_name(lane.op)) + " at " + site(lane.file, lane.line) + ": lane " +
                     std::to_string(l) + " reads lane " + std::to_string(source) + ", which is not in the mask");
      lane.result = lane_at(source).value;
    }
  }
  for (unsigned rest = mask; rest; rest &= rest - 1) {
    const int i = first + __builtin_ctz(rest);
    lanes_[static_cast<size_t>(i)]->wait = Wait::ready;
    ready_.push_back(i);
  }
  parked_[static_cast<size_t>(warp)] &= ~mask;
}

std::string BlockRunner::describe_deadlock() const {
  for (int i = 0; i < n_; ++i) {
    const Lane& lane = *lanes_[static_cast<size_t>(i)];
    if (lane.wait != Wait::collective) continue;
    const int warp = i / kWarpSize;
    unsigned missing = lane.mask & ~parked_[static_cast<size_t>(warp)];
    std::string who;
    for (; missing; missing &= missing - 1) {
      const int l = __builtin_ctz(missing), other = warp * kWarpSize + l;
      who += " " + std::to_string(l) +
             (other >= n_ ? " (no such thread)"
              : lanes_[static_cast<size_t>(other)]->wait == Wait::done ? " (exited)"
                                                                      : " (at __syncthreads)");
    }
    return "deadlock: thread " + std::to_string(i) + " waits at " + op_name(lane.op) + " (" +
           site(lane.file, lane.line) + ") for lanes of warp " + std::to_string(warp) + " that never come:" + who;
  }
  return "deadlock";
}

void* BlockRunner::shared_declaration(const char* key, size_t bytes, size_t align) {
  for (const auto& d : declarations_)
    if (d.key == key || std::strcmp(d.key, key) == 0) return static_shared_ + d.offset;
  const size_t offset = (static_used_ + align - 1) / align * align;
  if (offset + bytes > kStaticSharedBytes || offset + bytes + dynamic_bytes_ > kMaxSharedBytes) {
    fault("__shared__ " + std::string(key) + ": " + std::to_string(offset + bytes) + " bytes of static shared memory (" +
          std::to_string(dynamic_bytes_) + " dynamic) is more than a block has");
    current().fiber.finish();
  }
  static_used_ = offset + bytes;
  declarations_.push_back({key, offset});
  std::memset(static_shared_ + offset, kPoison, bytes);
  return static_shared_ + offset;
}

std::atomic<uint64_t> launches{0};

}  // namespace

ThreadOrder thread_order() {
  static const ThreadOrder order = [] {
    const char* e = std::getenv("ORZO_CUDA_CPU_ORDER");
    const std::string s = e ? e : "";
    if (s.empty() || s == "shuffle") return ThreadOrder::shuffle;
    if (s == "forward") return ThreadOrder::forward;
    if (s == "reverse") return ThreadOrder::reverse;
    // A misspelt order would otherwise run the default and look like a run of the order asked for.
    std::fprintf(stderr, "cuda_cpu: ORZO_CUDA_CPU_ORDER='%s' is not shuffle, forward or reverse\n", s.c_str());
    std::exit(2);
  }();
  return order;
}

std::string run_grid(const Grid& g) {
  if (!runner) runner = std::make_unique<BlockRunner>();
  OrderRng rng(launches.fetch_add(1));
  const ThreadOrder order = thread_order();
  for (unsigned z = 0; z < g.grid.z; ++z)
    for (unsigned y = 0; y < g.grid.y; ++y)
      for (unsigned x = 0; x < g.grid.x; ++x) {
        const std::string fault = runner->run(g, {x, y, z}, rng, order);
        if (!fault.empty())
          return "kernel launched at " + site(g.file, g.line) + ", block (" + std::to_string(x) + "," +
                 std::to_string(y) + "," + std::to_string(z) + "), " + fault;
      }
  current_place = nullptr;
  return "";
}

// What the kernel language calls from inside a CUDA thread.

void sync_threads(const char* file, int line) {
  Lane& lane = runner->current();
  lane.wait = Wait::barrier;
  lane.file = file;
  lane.line = line;
  lane.fiber.suspend();
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* file, int line) {
  Lane& lane = runner->current();
  lane.wait = Wait::collective;
  lane.op = op;
  lane.mask = mask;
  lane.value = value;
  lane.arg = arg;
  lane.width = width;
  lane.file = file;
  lane.line = line;
  lane.fiber.suspend();
  return lane.result;
}

unsigned active_mask() { return runner->active_mask(); }

void device_fault(const char* what) {
  runner->fault(what);
  runner->current().fiber.finish();
}

void* block_shared_bytes(const char* key, size_t bytes, size_t align) {
  return runner->shared_declaration(key, bytes, align);
}

void* dynamic_shared_bytes() { return runner->dynamic_shared(); }

}  // namespace orzo::cuda_cpu
