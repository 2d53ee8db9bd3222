// AppState: everything the window remembers between frames (settings, the replays built from
// sim/view, playback, the lesson stage), and the actions that change it. Panels read it and draw.
// Nothing here counts: every figure comes from sim/view (which takes it from sim/).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/cli/cli.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/spec/gpu_spec.hpp"
#include "sim/view/compare.hpp"
#include "sim/view/replay_view.hpp"
#include "sim/view/timeline_view.hpp"
#include "viz/platform.hpp"

struct ImFont;  // Dear ImGui's, declared here so that this header needs no ImGui

namespace hbmlab::viz {

// Background work (viz/platform.hpp): a thread on the desktop, slices between frames in the page.
template <class T>
using Job = platform::Job<T>;

// The tabs of the right-hand pane, which lesson stages bring forward by their `panel` key.
enum class Tab { softmax, io, explorer, timeline, measured, onchip };
// The tab a stage's `panel` key (or a screenshot's tab=) names; none for the panels that are not tabs.
std::optional<Tab> tab_named(std::string_view panel);

// The algorithm a room names to be shown beside it (WindowTraits::partner).
Algo partner_of(Algo algo);

// What the user chose in the controls; a change rebuilds the replays.
struct Settings {
  int gpu = 0;                  // index into AppState::gpus
  Algo algo = default_algo();
  bool side_by_side = false;
  Algo algo_b = partner_of(default_algo());  // the right-hand algorithm when side by side
  std::int64_t N = 1024, d = 64;  // sliders move them by powers of two
  std::int64_t batch = 1, heads = 1;  // B and H
  Dtype dtype = Dtype::fp16;
  bool auto_blocks = true;            // the paper's rule, else Br and Bc below
  std::int64_t Br = 64, Bc = 128;
  bool gpu_sram = true;               // the GPU preset's SRAM, else sram_bytes
  std::int64_t sram_bytes = 131072;
  bool causal = false;
  std::string block_mask;  // --block-mask SPEC; empty: every block pair
  // Decoding: NQ query rows and HKV K/V heads (0: N and H, self-attention); the split count (0: the
  // room fills the SMs) and FlashDecoding++'s φ (none: from the scores' statistics), for the rooms
  // that take them.
  std::int64_t query_len = 0, kv_heads = 0, splits = 0;
  std::optional<double> unified_max;
  int watch_row = -1;  // −1: let sim/view pick a row whose max grows mid-way

  bool operator==(const Settings&) const = default;
};

struct Playback {
  std::int64_t pos = 0;   // steps done in the left replay
  bool playing = false;
  float speed = 4;        // steps per second
  double phase = 0;       // fraction of the next step already shown (animation)
};

struct AppState {
  // Inputs
  GuiOptions options;
  std::vector<GpuSpec> gpus;
  std::vector<std::string> scenario_names;
  std::string open_path;  // the "open file" box

  // The scenario and lesson
  Scenario scenario;
  std::string scenario_error;  // a scenario that failed to load: shown in the window
  int stage = 0;

  Settings settings;
  Playback play;

  // Built from settings (sim/view)
  std::unique_ptr<view::ReplayView> replay[2];  // [1] only when side by side
  std::string replay_error;                     // why no replay could be built
  std::vector<view::AlgoBar> bars;
  // What the bars were computed for (bars_key in state.cpp): a rebuild that changes only the room on
  // screen (lesson 8's flash2 to flash3) keeps them rather than run every room of the pass again.
  std::optional<std::pair<Settings, Pass>> bars_for;
  std::optional<view::ExplorerView> explorer;
  Job<view::ExplorerView> explorer_job;
  std::string explorer_error;
  view::ExplorerRequest explorer_request;
  int explorer_colour = 0;  // 0: HBM accesses, 1: predicted time (timing engine)
  struct Progress {
    std::atomic<std::size_t> done{0}, total{0};
  };
  Job<std::vector<double>> times_job;  // the engine over the explorer's grid, on request
  std::shared_ptr<Progress> times_progress;  // cells of the grid done, for the panel
  bool times_ready = false;
  std::string times_error;
  // Recorded runs of the explorer's problem on its GPU (measurements_dir), read once its grid is in.
  std::vector<view::MeasuredCell> explorer_runs;
  Job<std::vector<view::MeasuredCell>> explorer_runs_job;
  std::optional<view::TimelineView> timeline;
  Job<ValidationReport> measured_job;  // started by prefetch_measured, or when the Measured tab is first shown
  std::shared_ptr<Progress> measured_progress;  // records predicted so far, for the panel
  // The records the job has predicted so far, shared with its thread. It predicts the records of the
  // problem on screen first, then the other records of its room in the files that hold those, then
  // every other (view::MeasuredLoad::rank), so that the tab shows the lesson's own records at once and
  // the others as they come.
  struct MeasuredSoFar {
    std::mutex mutex;
    AttentionProblem problem;  // the room and problem ranked first
    Algo algo = default_algo();
    bool rank_changed = true;  // the job's thread ranks the records anew before its next step
    std::string key() const;   // problem and algo's measured_key
    std::shared_ptr<const ValidationReport> report;  // after each step
    std::string report_key;          // the key `report` was ranked for
    bool own_done = false;  // that key's records ranked 0 and 1 are in
  };
  std::shared_ptr<MeasuredSoFar> measured_so_far;
  bool wait_for_all_measured = false;  // a screenshot of the Measured tab waits for every record, not only its own
  std::optional<ValidationReport> measured;
  std::string measured_error;
  // The Inside-the-SM tab's recorded counters: only the records of the problem on screen, so that
  // the tab need not wait for every record of every file (`measured`, when in, has them too).
  Job<ValidationReport> onchip_measured_job;
  std::optional<ValidationReport> onchip_measured;
  std::string onchip_measured_key;  // the room and problem they were read for
  std::string onchip_measured_error;

  // Window
  Tab tab = Tab::io;
  bool select_tab = true;   // bring `tab` forward on the next frame
  std::string highlight;    // panel a lesson stage points at: memory, matrix, softmax, ...
  bool show_help = false;
  // Stacked panes (a small window): the scenario, stage and panel, and the tab, last brought into view.
  std::string scrolled_for;
  Tab scrolled_tab = Tab::io;
  bool decode_controls_open = false;  // the controls' decoding section (a decoding scenario opens it)
  float ui_scale = 1;
  ImFont* font_large = nullptr;  // lesson titles and the narration
  std::string measurements_dir;
};

// [actions]
void init_state(AppState& app, const GuiOptions& options);
void load_scenario_into(AppState& app, const std::string& name_or_path);  // errors go to scenario_error
void apply_stage(AppState& app, int stage);
void rebuild(AppState& app);  // after a change of settings
void poll_jobs(AppState& app, bool wait);  // wait: for the jobs the visible tab needs (screenshots)
void request_times(AppState& app);
void request_measured(AppState& app);
// Whether a measurement record is of the problem on screen: the same room (algorithm and pass), N, d,
// causal flag and block mask. The Measured tab rings these.
bool IsMeasuredOfProblem(const ValidationRow& row, const AttentionProblem& problem, Algo algo);
// Starts reading the recorded on-chip counters of `res`'s room and problem (once per problem).
void request_onchip_measured(AppState& app, const SimulationResult& res);
// An interactive window starts reading the measurements as soon as the explorer's grid is in, so that
// the Measured tab is ready, or nearly, when the class gets to it (screenshot runs do not).
void prefetch_measured(AppState& app);
void advance(AppState& app, double dt_seconds);  // playback
void step_by(AppState& app, std::int64_t delta);
void jump_to(AppState& app, std::int64_t pos);
std::int64_t pos_b(const AppState& app);  // the right replay's position, in step with the left
const GpuSpec& current_gpu(const AppState& app);
view::ReplayRequest replay_request(const AppState& app, Algo algo);

}  // namespace hbmlab::viz
