#pragma once
// The packed copies of weight matrices (kernels/cpu/packed_rows.hpp), one per matrix for
// the whole process: every CPU backend that multiplies a matrix (replicas of a stage, a
// worker replaced by another) shares its copy, as they share the mapped file, so packing
// never multiplies a model's memory by its backends. A copy lives as long as a backend
// holds it, in 2 MiB pages where the kernel gives them (core/page_memory.hpp).
#include <memory>

#include "core/page_memory.hpp"
#include "core/tensor.hpp"
#include "core/thread_pool.hpp"

namespace orzo {

using PackedMatrix = std::shared_ptr<const PageMemory>;

// Points w at the process's packed copy of its rows, made on first use, and returns it for
// the caller to hold; null, and w unchanged, where its rows do not pack. The first packing
// of a matrix hands the stored rows' pages back to the kernel as it goes (release_pages:
// products, and a tied embedding's gather, read the copy from then on; a read of the
// stored rows brings their pages back). `pool` packs. Thread-safe.
PackedMatrix use_packed_rows(TensorView& w, ThreadPool& pool);

}  // namespace orzo
