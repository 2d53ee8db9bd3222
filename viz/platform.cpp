// The desktop's and the page's sides of viz/platform.hpp, one function each.
#include "viz/platform.hpp"

#include <GLFW/glfw3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#include <emscripten/html5.h>

#include <chrono>

#include <nlohmann/json.hpp>
#else
#include <stb_image_write.h>
#endif

#ifndef HBMLAB_SOURCE_DIR
#define HBMLAB_SOURCE_DIR "."
#endif

namespace hbmlab::viz::platform {

#ifndef __EMSCRIPTEN__

std::string cannot_open_reason() {
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) return "no display ($DISPLAY is not set)";
  return {};
}

void window_hints() {
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
}

const char* glsl_version() { return "#version 330"; }

float content_scale(GLFWwindow* window) {
  float sx = 1, sy = 1;
  glfwGetWindowContentScale(window, &sx, &sy);
  return sx;
}

void run_frames(std::function<bool()> frame) {
  while (frame()) {
  }
}

void begin_frame(GLFWwindow*) {}
void end_frame(const FrameInfo&) {}

bool save_screenshot(const std::string& path, int w, int h) {
  std::vector<unsigned char> pixels(static_cast<std::size_t>(w) * h * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  stbi_flip_vertically_on_write(1);
  // Written whole or not at all: a temporary file, then a rename.
  const std::string tmp = path + ".tmp";
  if (!stbi_write_png(tmp.c_str(), w, h, 3, pixels.data(), w * 3)) return false;
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

// The recorded measurements: beside an installed binary (`make install`: PREFIX/share/hbmlab/measurements),
// else the source tree's.
std::string measurements_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "hbmlab" / "measurements";
    if (std::filesystem::is_directory(installed, ec)) return installed.string();
  }
  return std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements";
}

std::optional<LessonRequest> take_lesson_request() { return std::nullopt; }

#else  // the page

// clang-format off
// The canvas fills the browser window (index.html's style); its back buffer follows the CSS size
// times devicePixelRatio, through Emscripten's GLFW, which then reports that size to Dear ImGui.
EM_JS(void, page_sync_canvas_size, (), {
  var canvas = Module['canvas'];
  var dpr = window.devicePixelRatio || 1;
  var w = Math.max(1, Math.round(canvas.clientWidth * dpr)), h = Math.max(1, Math.round(canvas.clientHeight * dpr));
  if (canvas.width != w || canvas.height != h) Browser.setCanvasSize(w, h);
});
EM_JS(double, page_device_pixel_ratio, (), { return window.devicePixelRatio || 1; });
// The address's fragment, "#lesson=3&stage=2" or "#scenario=NAME", as "3 2 " or "0 1 NAME" when it
// changed since the last call.
EM_JS(char*, page_take_fragment, (), {
  var hash = window.location.hash;
  if (hash === Module['hbmlabLastHash']) return 0;
  Module['hbmlabLastHash'] = hash;
  var params = new URLSearchParams(hash.substring(1));
  var text;
  if (params.has('scenario')) {
    text = "0 1 " + params.get('scenario');
  } else if (params.has('lesson')) {
    text = (parseInt(params.get('lesson'), 10) || 1) + " " + (parseInt(params.get('stage') || "1", 10) || 1) + " ";
  } else {
    return 0;
  }
  var size = lengthBytesUTF8(text) + 1, p = _malloc(size);
  stringToUTF8(text, p, size);
  return p;
});
// What the page's test reads: window.hbmlab.{frames, first_frame_ms, canvas, frame_ms, lesson, stage,
// stages, lessons, title, stage_title, title_rect, error, working, tab, help, side_by_side,
// measured_cells, mouse, longest_frame_ms}.
EM_JS(void, page_publish, (const char* json), {
  var s = window['hbmlab'] = window['hbmlab'] || {'frames': 0};
  s['frames'] += 1;
  if (s['frames'] == 1) s['first_frame_ms'] = performance.now();
  Object.assign(s, JSON.parse(UTF8ToString(json)));
  s['longest_frame_ms'] = Math.max(s['longest_frame_ms'] || 0, s['frame_ms']);
  // The address follows the lesson and stage shown (unless a new one waits to be read).
  var here = "#lesson=" + s['lesson'] + "&stage=" + s['stage'];
  if (s['lesson'] > 0 && window.location.hash != here && window.location.hash === Module['hbmlabLastHash']) {
    history.replaceState(null, "", here);
    Module['hbmlabLastHash'] = here;
  }
  s['canvas'] = [Module['canvas'].width, Module['canvas'].height];
});
// clang-format on

std::string cannot_open_reason() { return {}; }

void window_hints() {
  glfwWindowHint(GLFW_CLIENT_API, GLFW_OPENGL_ES_API);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  // Colour only: an opaque canvas without depth or stencil is less for a software renderer to do.
  glfwWindowHint(GLFW_ALPHA_BITS, 0);
  glfwWindowHint(GLFW_DEPTH_BITS, 0);
  glfwWindowHint(GLFW_STENCIL_BITS, 0);
}

const char* glsl_version() { return "#version 300 es"; }

float content_scale(GLFWwindow*) { return static_cast<float>(page_device_pixel_ratio()); }

namespace {
void call_frame(void* arg) {
  auto* frame = static_cast<std::function<bool()>*>(arg);
  if (!(*frame)()) emscripten_cancel_main_loop();
}
}  // namespace

void run_frames(std::function<bool()> frame) {
  // The browser calls it on each animation frame; it lives as long as the page.
  auto* kept = new std::function<bool()>(std::move(frame));
  emscripten_set_main_loop_arg(call_frame, kept, 0, true);
}

std::chrono::steady_clock::time_point frame_start;

void begin_frame(GLFWwindow*) {
  frame_start = std::chrono::steady_clock::now();
  page_sync_canvas_size();
}

void end_frame(const FrameInfo& info) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frame_start).count();
  const nlohmann::json j = {{"lesson", info.lesson}, {"stage", info.stage}, {"stages", info.stages},
                            {"lessons", info.lessons}, {"title", info.title}, {"stage_title", info.stage_title},
                            {"title_rect", {info.title_x, info.title_y, info.title_w, info.title_h}},
                            {"error", info.error}, {"working", info.working}, {"tab", info.tab},
                            {"help", info.help}, {"side_by_side", info.side_by_side},
                            {"measured_cells", info.measured_cells}, {"mouse", {info.mouse_x, info.mouse_y}}, {"frame_ms", ms}};
  page_publish(j.dump().c_str());
}

bool save_screenshot(const std::string&, int, int) { return false; }

std::string measurements_dir() { return "/assets/measurements"; }

std::optional<LessonRequest> take_lesson_request() {
  char* text = page_take_fragment();
  if (!text) return std::nullopt;
  LessonRequest r;
  int name_at = 0;
  std::sscanf(text, "%d %d %n", &r.lesson, &r.stage, &name_at);
  r.scenario = text + name_at;
  std::free(text);
  return r;
}

#endif

}  // namespace hbmlab::viz::platform
