#pragma once
// Runs a test body once per ISA level this machine runs (kernels/cpu/isa.hpp), with that
// level active and named in any failure, then makes the level that was active before active
// again. So every kernel test checks every path the CPU has against its reference.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cpu/isa.hpp"

namespace orzo::testing {

template <class Body>
void for_each_isa(Body&& body) {
  const cpu::Isa before = cpu::kernels().isa;
  for (cpu::Isa isa : cpu::runnable_isas()) {
    SCOPED_TRACE(std::string("CPU kernels ") + cpu::isa_name(isa));
    cpu::use_isa(isa);
    body();
  }
  cpu::use_isa(before);
}

}  // namespace orzo::testing
