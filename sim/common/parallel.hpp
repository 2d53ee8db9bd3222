// parallel_for: body(i) for every i in [0, n), spread over the machine's cores. The calls must
// be independent of one another (each writes only its own slot). Used where hbmlab runs the
// timing engine on many configurations at once (validate, the window's Measured tab).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "sim/common/progress.hpp"

namespace hbmlab {

// The first exception a call throws stops the others from starting and is rethrown here once
// every thread has finished. `threads` = 0: one per hardware thread.
template <class Body>
void parallel_for(std::size_t n, Body&& body, const Progress& progress = {}, unsigned threads = 0) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, n));
  std::mutex mutex;  // guards `error`, `done` and the progress calls
  std::exception_ptr error;
  std::size_t done = 0;
  auto finished = [&] {
    const std::lock_guard<std::mutex> lock(mutex);
    ++done;
    if (progress) progress(done, n);
  };
  if (threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) {
      body(i);
      finished();
    }
    return;
  }
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        body(i);
        finished();
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace hbmlab
