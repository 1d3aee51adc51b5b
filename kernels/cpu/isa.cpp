#include "kernels/cpu/isa.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace orzo::cpu {

// The levels CMake compiled kernels/cpu/isa/ for (kernels/CMakeLists.txt).
#define ORZO_DECLARE_LEVEL(ns) \
  namespace ns {               \
  const KernelTable& kernel_table(); \
  const KernelTable& kernel_table_bf16(); \
  const KernelTable& kernel_table_amx(); \
  }
#if defined(ORZO_HAVE_ISA_NATIVE)
ORZO_DECLARE_LEVEL(isa_native)
#else
ORZO_DECLARE_LEVEL(isa_portable)
#if defined(ORZO_HAVE_ISA_AVX2)
ORZO_DECLARE_LEVEL(isa_avx2)
#endif
#if defined(ORZO_HAVE_ISA_AVX512)
ORZO_DECLARE_LEVEL(isa_avx512)
#endif
#endif
#undef ORZO_DECLARE_LEVEL

namespace {

std::vector<const KernelTable*> built_tables() {
#if defined(ORZO_HAVE_ISA_NATIVE)
#if defined(__AVX512BF16__) && defined(__AVX512VNNI__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
  return {&isa_native::kernel_table(), &isa_native::kernel_table_bf16(), &isa_native::kernel_table_amx()};
#elif defined(__AVX512BF16__) && defined(__AVX512VNNI__)
  return {&isa_native::kernel_table(), &isa_native::kernel_table_bf16()};
#else
  return {&isa_native::kernel_table()};
#endif
#else
  return {
      &isa_portable::kernel_table(),
#if defined(ORZO_HAVE_ISA_AVX2)
      &isa_avx2::kernel_table(),
#endif
#if defined(ORZO_HAVE_ISA_AVX512)
      &isa_avx512::kernel_table(),
      &isa_avx512::kernel_table_bf16(),
      &isa_avx512::kernel_table_amx(),
#endif
  };
#endif
}

#if defined(__x86_64__) || defined(__i386__)
// CPUID leaf 1, ECX bit 29; clang's __builtin_cpu_supports does not know "f16c".
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

// Whether the CPU has AMX tiles with BF16 (CPUID leaf 7: EDX bits 22 and 24) and Linux lets
// this process use them. The tile data is 8 KiB of state a thread switch must save, so
// Linux hands it out only on request (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, from
// 5.16), once for the whole process; a kernel or hypervisor that refuses leaves the level
// out rather than let the first tile instruction die of SIGILL.
bool amx_usable() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool usable = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
#else
  return false;
#endif
}

// Whether this CPU (and the OS, which must save the wider registers) runs a level;
// __builtin_cpu_supports checks both, amx_usable() the tiles.
bool cpu_runs(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c() &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512vnni");
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2: return avx2;
    case Isa::Avx512Vnni: return avx512;
    case Isa::Avx512Bf16: return avx512 && __builtin_cpu_supports("avx512bf16");
    case Isa::Avx512Amx: return avx512 && __builtin_cpu_supports("avx512bf16") && amx_usable();
  }
  return false;
#else
  return isa == Isa::Portable;
#endif
}

const KernelTable* runnable_table(Isa isa) {
  for (const KernelTable* t : built_tables())
    if (t->isa == isa && cpu_runs(isa)) return t;
  return nullptr;
}

template <class Levels>
std::string joined_names(const Levels& levels) {
  std::string names;
  for (Isa isa : levels) names += (names.empty() ? "" : ", ") + std::string(isa_name(isa));
  return names;
}

const KernelTable* initial_table() {
  if (const char* env = std::getenv("ORZO_CPU_ISA"); env && *env) {
    const std::optional<Isa> isa = parse_isa(env);
    if (!isa)
      throw std::invalid_argument(std::string("ORZO_CPU_ISA=") + env + " names no ISA level (" + isa_names() + ")");
    return &kernels_for(*isa);
  }
  return &kernels_for(runnable_isas().back());
}

std::atomic<const KernelTable*> active{nullptr};

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512Vnni: return "avx512-vnni";
    case Isa::Avx512Bf16: return "avx512-bf16";
    case Isa::Avx512Amx: return "avx512-amx";
  }
  return "?";
}

std::string isa_names() { return joined_names(kAllIsas); }

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : kAllIsas)
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas)
    if (runnable_table(isa)) out.push_back(isa);
  return out;
}

const KernelTable& kernels_for(Isa isa) {
  if (const KernelTable* t = runnable_table(isa)) return *t;
  throw std::invalid_argument(std::string("CPU kernels for ") + isa_name(isa) +
                              " are not in this build or not run by this CPU; it runs: " + joined_names(runnable_isas()));
}

const KernelTable& kernels() {
  const KernelTable* t = active.load(std::memory_order_acquire);
  if (t) return *t;
  static const KernelTable* const initial = initial_table();
  // A use_isa() that got in first keeps its choice.
  t = nullptr;
  return active.compare_exchange_strong(t, initial, std::memory_order_acq_rel) ? *initial : *t;
}

void use_isa(Isa isa) { active.store(&kernels_for(isa), std::memory_order_release); }

CoreKind core_kind() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return CoreKind::Other;
  // The vendor string is EBX, EDX, ECX: "Genu", "ineI", "ntel" or "Auth", "enti", "cAMD".
  if (ebx == 0x756e6547 && edx == 0x49656e69 && ecx == 0x6c65746e) return CoreKind::Intel;
  if (ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163 && __get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    // AMD's family is the base family (bits 8-11, 0xF from Zen on) plus the extended one (20-27).
    const unsigned family = ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF);
    if (family >= 0x1A) return CoreKind::Zen5;
  }
#endif
  return CoreKind::Other;
}

std::string cpu_model_name() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      if (const auto colon = line.find(':'); colon != std::string::npos) model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  return model;
}

}  // namespace orzo::cpu
