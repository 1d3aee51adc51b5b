#pragma once
// One request run to its end with its text streamed to stdout: what `generate` does once
// and `chat` does each turn.

#include "actors/engine.hpp"

#include <functional>

namespace orzo::cli {

// Writes each chunk's text to stdout as it arrives (after passing the chunk to `on_chunk`,
// when given) and a newline at the end; an error Completion is also reported on stderr.
Completion stream_to_stdout(Engine& engine, SessionRequest request,
                            const std::function<void(const TextChunk&)>& on_chunk = {});

}  // namespace orzo::cli
