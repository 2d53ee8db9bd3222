// Where the desktop window and the page in a browser (WebAssembly, `make web`) differ, and nowhere
// else: how the window opens, how frames are driven, where background work runs, screenshots, the
// recorded measurements' folder and the page's address. Every other file of viz/ is the same in both.
// The browser build is the one compiled by Emscripten (__EMSCRIPTEN__).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

struct GLFWwindow;

namespace hbmlab::viz::platform {

#ifdef __EMSCRIPTEN__
inline constexpr bool kBrowser = true;
#else
inline constexpr bool kBrowser = false;
#endif

// Why no window can open here (desktop: no display), or empty.
std::string cannot_open_reason();
// GLFW hints before the window is created, and the GLSL version its OpenGL backend compiles for:
// OpenGL 3.3 core on the desktop, WebGL 2 (OpenGL ES 3.0, "#version 300 es") in the browser.
void window_hints();
const char* glsl_version();
// Device pixels per point: the monitor's content scale, or the page's devicePixelRatio.
float content_scale(GLFWwindow* window);
// Calls frame() until it returns false: a loop on the desktop, the browser's animation frames in
// the page (where this call does not return: everything frame() uses must outlive the caller).
void run_frames(std::function<bool()> frame);
// Before each frame: the page's canvas follows the browser window's size and devicePixelRatio.
void begin_frame(GLFWwindow* window);
// After each rendered frame: the page publishes what its test reads (frames drawn, lesson, stage).
struct FrameInfo {
  int lesson = 0, stage = 0, stages = 0, lessons = 0;  // lesson: 1-based number, 0 for another scenario
  std::string title, stage_title;
  bool working = false;  // background work (Job below) not finished
  int tab = 0;           // the right-hand tab, numbered as its key (1 … 5)
  bool help = false;     // the help overlay is open
  bool side_by_side = false;
  int measured_cells = 0;  // the explorer's cells with a recorded run
  float mouse_x = 0, mouse_y = 0;  // the pointer as Dear ImGui sees it, in device pixels
  float title_x = 0, title_y = 0, title_w = 0, title_h = 0;  // the lesson's title, in device pixels
  std::string error;  // a scenario that did not load
};
void end_frame(const FrameInfo& info);
// The back buffer as a PNG, written whole or not at all (the desktop's --screenshot; the page has none).
bool save_screenshot(const std::string& path, int w, int h);
// The folder of recorded measurements: next to the sources, or embedded in the page.
std::string measurements_dir();
// A lesson and stage the page's address asks for (#lesson=3&stage=2), or another embedded scenario
// (#scenario=workloads/h100-flash2-4k), once each time it changes.
struct LessonRequest {
  int lesson = 1, stage = 1;  // 1-based
  std::string scenario;       // when not empty, instead of the lesson
};
std::optional<LessonRequest> take_lesson_request();

// How long the page gives background work in each frame before it draws the next.
inline constexpr double kSliceSeconds = 0.012;

// Work that takes seconds (the explorer's sweep, the timing engine over the grid, reading and
// validating measurements) never makes the window wait: on the desktop it runs on a detached
// thread; in the page, which has one thread, it runs in slices between frames. A newer request
// simply replaces an older one.
//
// Work comes whole (start: one call) or in slices (start_slices: step() does one slice and says
// whether more remain, finish() gives the result); only sliced work lets the page draw meanwhile.
template <class T>
class Job {
public:
  template <class F>
  void start(F work) {
    auto value = std::make_shared<std::optional<T>>();
    start_slices(
        [value, work] {
          *value = work();
          return false;
        },
        [value] { return std::move(**value); });
  }
  void start_slices(std::function<bool()> step, std::function<T()> finish) {
    auto shared = std::make_shared<Shared>();
    shared->step = std::move(step);
    shared->finish = std::move(finish);
    shared_ = shared;
#ifndef __EMSCRIPTEN__
    std::thread([shared] {
      while (!shared->run_slice()) {
      }
    }).detach();
#endif
  }
  bool started() const { return shared_ != nullptr; }
  bool running() const {
    if (!shared_) return false;
    const std::lock_guard<std::mutex> lock(shared_->mutex);
    return !shared_->done;
  }
  // Moves a finished result out (once); false while running or when nothing was started. In the
  // page, this is where the work advances: slices for up to kSliceSeconds.
  bool take(std::optional<T>& value, std::string& error) {
    if (!shared_) return false;
#ifdef __EMSCRIPTEN__
    run_for(kSliceSeconds);
#endif
    const std::lock_guard<std::mutex> lock(shared_->mutex);
    if (!shared_->done) return false;
    value = std::move(shared_->value);
    error = shared_->error;
    shared_.reset();
    return true;
  }
  void wait(double seconds) {
#ifdef __EMSCRIPTEN__
    if (shared_) run_for(seconds);
#else
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
#endif
  }
  void cancel() { shared_.reset(); }  // the thread finishes on its own; its result is dropped

private:
  struct Shared {
    std::mutex mutex;
    std::function<bool()> step;
    std::function<T()> finish;
    std::optional<T> value;
    std::string error;
    bool done = false;
    // One slice; true once the work is over (finished or failed).
    bool run_slice() {
      std::optional<T> v;
      std::string e;
      try {
        if (step()) return false;
        v = finish();
      } catch (const std::exception& x) {
        e = x.what();
      }
      const std::lock_guard<std::mutex> lock(mutex);
      value = std::move(v);
      error = std::move(e);
      done = true;
      return true;
    }
  };
  void run_for(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const std::shared_ptr<Shared> shared = shared_;
    while (!shared->done && !shared->run_slice() && std::chrono::steady_clock::now() < until) {
    }
  }
  std::shared_ptr<Shared> shared_;
};

}  // namespace hbmlab::viz::platform
