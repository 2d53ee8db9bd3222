// The window's actions: load a scenario or lesson stage, rebuild the replays from the settings
// (sim/view does the work), run the explorer's sweep in the background, and play.
#include "viz/state.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/common/error.hpp"
#include "viz/panels.hpp"

namespace hbmlab::viz {

const GpuSpec& current_gpu(const AppState& app) { return app.gpus[static_cast<std::size_t>(app.settings.gpu)]; }

std::optional<Tab> tab_named(std::string_view panel) {
  const std::pair<std::string_view, Tab> tabs[] = {{"softmax", Tab::softmax},   {"io", Tab::io},
                                                   {"explorer", Tab::explorer}, {"timeline", Tab::timeline},
                                                   {"measured", Tab::measured}, {"onchip", Tab::onchip}};
  for (const auto& [name, tab] : tabs)
    if (panel == name) return tab;
  return std::nullopt;
}

Algo partner_of(Algo algo) { return algo_named(algo->window().partner, algo->pass()); }

view::ReplayRequest replay_request(const AppState& app, Algo algo) {
  const Settings& s = app.settings;
  view::ReplayRequest r;
  r.sim.gpu = current_gpu(app);
  r.sim.problem = {s.batch, s.heads, s.N, s.d, s.dtype, s.causal};
  if (!s.block_mask.empty()) r.sim.problem.block_mask = parse_block_mask(s.block_mask);
  r.sim.problem.query_len = s.query_len;
  r.sim.problem.kv_heads = s.kv_heads;
  if (algo->supports().splits) r.sim.problem.kv_splits = s.splits;
  if (algo->supports().unified_max) r.sim.problem.unified_max = s.unified_max;
  r.sim.algo = algo;
  if (!s.auto_blocks) {
    r.sim.block_rows = s.Br;
    r.sim.block_cols = s.Bc;
  }
  if (!s.gpu_sram) r.sim.sram_bytes = s.sram_bytes;
  // The CPU check of the whole output is the CLI's job; the window only needs the watched row.
  r.sim.numerics = NumericsMode::off;
  r.sim.record_timeline = true;  // for the timeline panel
  r.watch_row = s.watch_row;
  return r;
}

void init_state(AppState& app, const GuiOptions& options) {
  app.options = options;
  app.gpus = gpu_presets();
  app.scenario_names = scenario_names();
  load_scenario_into(app, options.scenario.empty() ? std::string(kDefaultLesson) : options.scenario);
  if (options.stage > 0) apply_stage(app, options.stage - 1);
}

void load_scenario_into(AppState& app, const std::string& name_or_path) {
  Scenario sc;
  try {
    sc = load_scenario(name_or_path);
    const auto gpu = std::find_if(app.gpus.begin(), app.gpus.end(), [&](const GpuSpec& g) { return g.name == sc.gpu; });
    if (gpu == app.gpus.end()) fail_input("{}: gpu: no preset named '{}'", sc.origin, sc.gpu);
    app.settings.gpu = static_cast<int>(gpu - app.gpus.begin());
  } catch (const InputError& e) {
    app.scenario_error = e.what();  // keep what was on screen; the error is shown above it
    return;
  }
  app.scenario_error.clear();
  app.scenario = sc;
  Settings& s = app.settings;
  s.algo = sc.algorithms.empty() ? default_algo() : sc.algorithms.front();
  s.algo_b = sc.algorithms.size() > 1 ? sc.algorithms[1] : partner_of(s.algo);
  s.N = sc.problem.seq_len;
  s.d = sc.problem.head_dim;
  s.batch = sc.problem.batch;
  s.heads = sc.problem.heads;
  s.dtype = sc.problem.dtype;
  s.causal = sc.problem.causal;
  s.block_mask = sc.problem.block_mask ? sc.problem.block_mask->spec() : std::string();
  s.query_len = sc.problem.query_len;
  s.kv_heads = sc.problem.kv_heads;
  s.splits = sc.problem.kv_splits;
  s.unified_max = sc.problem.unified_max;
  app.decode_controls_open = s.query_len > 0 || s.kv_heads > 0 || s.splits > 0 || s.unified_max;
  s.auto_blocks = !sc.block_rows && !sc.block_cols;
  if (sc.block_rows) s.Br = *sc.block_rows;
  if (sc.block_cols) s.Bc = *sc.block_cols;
  s.gpu_sram = !sc.sram_bytes;
  if (sc.sram_bytes) s.sram_bytes = *sc.sram_bytes;
  s.watch_row = -1;  // a row that shows a rescale (sim/view picks it)
  app.stage = 0;
  // A new scenario is a new problem: its first stage rebuilds the replays even where it names the
  // algorithm already on screen (else the last scenario's replay would stay).
  app.replay[0].reset();
  app.replay[1].reset();
  if (!sc.stages.empty()) {
    apply_stage(app, 0);
  } else {
    app.highlight.clear();
    rebuild(app);
  }
}

void apply_stage(AppState& app, int stage) {
  if (app.scenario.stages.empty()) return;
  app.stage = std::clamp(stage, 0, static_cast<int>(app.scenario.stages.size()) - 1);
  const LessonStage& st = app.scenario.stages[static_cast<std::size_t>(app.stage)];
  Settings& s = app.settings;
  // The stage's algorithm (else the one on screen) in the stage's pass (else the one on screen).
  const Pass pass = st.pass.value_or(s.algo->pass());
  const Algo algo = parse_algo((st.algorithm ? *st.algorithm : s.algo)->name(), pass).value_or(s.algo);
  // A stage's φ holds for that stage only: the others run the lesson's own.
  const std::optional<double> phi = st.unified_max ? st.unified_max : app.scenario.problem.unified_max;
  // So does a stage's GPU: the others run the lesson's.
  const std::string& gpu_name = st.gpu ? *st.gpu : app.scenario.gpu;
  const auto gpu = std::find_if(app.gpus.begin(), app.gpus.end(), [&](const GpuSpec& g) { return g.name == gpu_name; });
  const int gpu_index = gpu == app.gpus.end() ? s.gpu : static_cast<int>(gpu - app.gpus.begin());
  const bool new_problem = (st.causal && *st.causal != s.causal) || (st.block_mask && *st.block_mask != s.block_mask) ||
                           phi != s.unified_max || gpu_index != s.gpu;
  const bool new_side = st.side_by_side && *st.side_by_side != s.side_by_side;
  const bool new_algo = algo != s.algo || new_problem || new_side;
  if (st.side_by_side) s.side_by_side = *st.side_by_side;
  s.algo = algo;
  if (s.algo_b->pass() != pass) s.algo_b = parse_algo(s.algo_b->name(), pass).value_or(partner_of(algo));
  if (s.algo_b == s.algo) s.algo_b = partner_of(algo);
  if (st.causal) s.causal = *st.causal;
  if (st.block_mask) s.block_mask = *st.block_mask;
  s.unified_max = phi;
  s.gpu = gpu_index;
  app.highlight = st.panel;
  if (const std::optional<Tab> tab = tab_named(st.panel)) {
    app.tab = *tab;
    app.select_tab = true;
  }
  if (new_algo || !app.replay[0]) {
    app.play.pos = 0;
    rebuild(app);
  }
  app.play.playing = true;
}

namespace {

// What the bars depend on: the settings that make the problem, GPU, blocks and SRAM on screen, and the
// shown room's pass and whether it passes on its split count and φ (replay_request; compare_algorithms
// gives them to the rooms that take them) — not which room it is, nor the one beside it.
std::pair<Settings, Pass> bars_key(Settings s) {
  const Algo shown = s.algo;
  if (!shown->supports().splits) s.splits = 0;
  if (!shown->supports().unified_max) s.unified_max.reset();
  s.algo = s.algo_b = default_algo();
  s.side_by_side = false;
  s.watch_row = -1;
  return {s, shown->pass()};
}

}  // namespace

void rebuild(AppState& app) {
  Settings& s = app.settings;
  const double fraction = app.replay[0] && app.replay[0]->step_count() > 0
                              ? double(app.play.pos) / double(app.replay[0]->step_count())
                              : 0.0;
  app.replay[0].reset();
  app.replay[1].reset();
  app.replay_error.clear();
  if (s.kv_heads > s.heads) s.kv_heads = 0;
  if (s.query_len > s.N) s.query_len = s.N;  // the N slider moved below NQ: decode against the whole cache
  const std::int64_t Nq = s.query_len > 0 ? s.query_len : s.N;
  if (s.watch_row >= Nq) s.watch_row = static_cast<int>(Nq - 1);
  try {
    app.replay[0] = std::make_unique<view::ReplayView>(replay_request(app, s.algo));
    if (s.side_by_side && s.algo_b == s.algo) s.algo_b = partner_of(s.algo);
    if (s.side_by_side) app.replay[1] = std::make_unique<view::ReplayView>(replay_request(app, s.algo_b));
  } catch (const InputError& e) {
    app.replay_error = e.what();
    app.replay[0].reset();
    app.replay[1].reset();
  }
  app.explorer.reset();
  app.explorer_error.clear();
  app.explorer_job.cancel();
  app.times_job.cancel();
  app.explorer_runs_job.cancel();
  app.explorer_runs.clear();
  app.times_ready = false;
  app.times_error.clear();
  app.timeline.reset();
  if (!app.replay[0]) {
    app.bars.clear();
    app.bars_for.reset();
    app.play.pos = 0;
    app.play.playing = false;
    return;
  }
  const view::ReplayView& r = *app.replay[0];
  if (s.auto_blocks) {  // show the blocks the paper's rule chose, ready for manual changes
    s.Br = r.blocks().Br;
    s.Bc = r.blocks().Bc;
  }
  if (s.gpu_sram) s.sram_bytes = r.result().sram_bytes_per_sm;
  app.play.pos = std::clamp<std::int64_t>(std::llround(fraction * double(r.step_count())), 0, r.step_count());
  app.play.phase = 0;
  // About half a minute for a whole replay, never slower than two steps a second.
  app.play.speed = static_cast<float>(std::clamp(double(r.step_count()) / 30.0, 2.0, 1e6));
  if (const auto key = bars_key(s); key != app.bars_for) {
    view::ReplayRequest bars_request = replay_request(app, s.algo);
    bars_request.sim.record_timeline = false;
    app.bars = view::compare_algorithms(bars_request.sim);
    app.bars_for = key;
  }
  app.timeline = view::timeline_view(r.result(), 16, 480);
  view::ExplorerRequest req{current_gpu(app), r.result().problem, s.algo, r.result().sram_bytes_per_block, r.blocks()};
  app.explorer_request = req;
  app.explorer_job.start([req] { return view::explore(req); });
}

void request_times(AppState& app) {
  if (!app.explorer || app.times_ready || app.times_job.started()) return;
  const view::ExplorerRequest req = app.explorer_request;
  const view::ExplorerView grid = *app.explorer;
  // A row of the grid per slice on the desktop (its cells on all cores), a cell per slice in the
  // page, so that it keeps drawing (viz/platform.hpp). Cells are row-major, as the grid's.
  auto times = std::make_shared<std::vector<double>>();
  auto progress = std::make_shared<AppState::Progress>();
  const std::size_t cols = grid.block_cols.size(), cells = grid.block_rows.size() * cols;
  progress->total = cells;
  app.times_progress = progress;
  app.times_job.start_slices(
      [req, grid, times, progress, cols, cells] {
        const std::size_t k = times->size();
        if (k >= cells) return false;
        view::ExplorerView some = grid;
        some.block_rows = {grid.block_rows[k / cols]};
        if (platform::kBrowser) some.block_cols = {grid.block_cols[k % cols]};
        const std::vector<double> t = view::explore_times(req, some);
        times->insert(times->end(), t.begin(), t.end());
        progress->done = times->size();
        return times->size() < cells;
      },
      [times] { return std::move(*times); });
}

bool IsMeasuredOfProblem(const ValidationRow& row, const AttentionProblem& problem, Algo algo) {
  const auto spec = [](const AttentionProblem& q) { return q.block_mask ? q.block_mask->spec() : std::string(); };
  return row.algo == algo && row.problem.seq_len == problem.seq_len && row.problem.head_dim == problem.head_dim &&
         row.problem.causal == problem.causal && spec(row.problem) == spec(problem);
}

namespace {

// A room and problem, for which the Measured tab ranks the records (rank_for): what
// IsMeasuredOfProblem compares.
std::string measured_key(const AttentionProblem& p, Algo algo) {
  return fmt::format("{} {} {} {} {}", algo->name(), p.seq_len, p.head_dim, p.causal,
                     p.block_mask ? p.block_mask->spec() : std::string());
}

void rank_measured(AppState& app) {
  const std::shared_ptr<AppState::MeasuredSoFar>& shared = app.measured_so_far;
  if (!shared) return;
  const AttentionProblem problem = app.replay[0] ? app.replay[0]->result().problem : AttentionProblem{};
  const std::lock_guard<std::mutex> lock(shared->mutex);
  // A new job ranks before its first step; after that, when the room or problem on screen changes.
  if (!shared->rank_changed && measured_key(problem, app.settings.algo) == shared->key()) return;
  shared->problem = problem;
  shared->algo = app.settings.algo;
  shared->rank_changed = true;
}

// 0: the records of `problem` in `algo`'s room; 1: the room's other records in the files that hold
// those (the lesson's own files: a sweep around its problem, PyTorch's and hbmlab's kernels); 2: the rest.
view::MeasuredLoad::Rank rank_for(const std::vector<ValidationRow>& rows, const AttentionProblem& problem, Algo algo) {
  std::vector<std::string> files;
  for (const ValidationRow& row : rows)
    if (IsMeasuredOfProblem(row, problem, algo) && std::find(files.begin(), files.end(), row.file) == files.end())
      files.push_back(row.file);
  return [files, problem, algo](const ValidationRow& row) {
    if (IsMeasuredOfProblem(row, problem, algo)) return 0;
    return row.algo == algo && std::find(files.begin(), files.end(), row.file) != files.end() ? 1 : 2;
  };
}

}  // namespace

std::string AppState::MeasuredSoFar::key() const { return measured_key(problem, algo); }

void request_measured(AppState& app) {
  if (app.measured || !app.measured_error.empty()) return;
  if (app.measured_job.started()) {
    rank_measured(app);  // the lesson may have moved on to another room or problem
    return;
  }
  const std::string dir = app.measurements_dir;
  auto progress = std::make_shared<AppState::Progress>();
  app.measured_progress = progress;
  auto shared = std::make_shared<AppState::MeasuredSoFar>();
  app.measured_so_far = shared;
  rank_measured(app);
  // A few records per slice on the desktop (each slice on all its cores), so that a new ranking
  // takes effect soon and the tab sees each one's records; one per slice in the page
  // (viz/platform.hpp). Asked in the slice: the page's 1 is a constant no lambda captures.
  auto load = std::make_shared<view::MeasuredLoad>(dir);
  struct Published {  // when so_far was last copied out
    std::size_t records = 0;
    bool first = false, own = false;  // ranks 0, and 0 and 1, all predicted
    std::string key;
  };
  auto published = std::make_shared<Published>();
  // A scripted run (a screenshot, a test: --frames) shows only the records of the problems it walks
  // through: once those of the problem on screen are in and published, the job waits for the next
  // problem rather than predict every file on a core that another program, or another test, would
  // rather have (the window's prefetch is off there too). The page's slices never wait.
  const bool own_only = app.options.frames > 0 && !platform::kBrowser && !app.wait_for_all_measured;
  app.measured_job.start_slices(
      [load, progress, shared, published, own_only] {
        std::string key;
        if (load->read()) {
          const std::lock_guard<std::mutex> lock(shared->mutex);
          if (shared->rank_changed) load->rank(rank_for(load->records(), shared->problem, shared->algo));
          shared->rank_changed = false;
          key = shared->key();
        }
        if (own_only && load->read() && published->own && published->key == key && load->done_through(1)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          return true;
        }
        const std::size_t records =
            platform::kBrowser ? 1 : std::max<std::size_t>(4, 2 * std::thread::hardware_concurrency());
        const bool more = load->step(records, [progress](std::size_t done, std::size_t total) {
          progress->total = total;
          progress->done = done;
        });
        // The records so far go out when the lesson's own are in, and every few dozen after (a copy of
        // every record per record would cost as much as predicting some in the page).
        const Published now{load->predicted(), load->done_through(0), load->done_through(1), key};
        const Published& last = *published;
        if (more && now.first == last.first && now.own == last.own && now.key == last.key && now.records < last.records + 32)
          return more;
        auto report = std::make_shared<const ValidationReport>(load->so_far());
        *published = now;
        const std::lock_guard<std::mutex> lock(shared->mutex);
        shared->report = std::move(report);
        shared->report_key = key;
        shared->own_done = now.own;
        return more;
      },
      [load] { return load->finish(); });
}

void request_onchip_measured(AppState& app, const SimulationResult& res) {
  const AttentionProblem problem = res.problem;
  const Algo algo = res.algo;
  const std::string key = fmt::format("{} {} {} {} {}", algo->name(), problem.seq_len, problem.head_dim,
                                      problem.causal, problem.instances());
  if (key == app.onchip_measured_key) return;
  app.onchip_measured_key = key;
  app.onchip_measured.reset();
  app.onchip_measured_error.clear();
  const std::string dir = app.measurements_dir;
  app.onchip_measured_job.start([dir, algo, problem] {
    return view::load_measured_where(dir, [&](const ValidationRow& row) { return IsMeasuredOnChipOf(row, algo, problem); });
  });
}

void prefetch_measured(AppState& app) {
  if (app.explorer && !app.explorer_job.running() && !app.times_job.running()) request_measured(app);
}

void poll_jobs(AppState& app, bool wait) {
  if (wait) {  // a screenshot shows finished panels: wait for what the visible tab needs
    app.explorer_job.wait(120);
  }
  std::string error;
  std::optional<view::ExplorerView> explorer;
  if (app.explorer_job.take(explorer, error)) {
    app.explorer = std::move(explorer);
    app.explorer_error = error;
    if (app.explorer) {  // the measured cells need the grid's axes; reading the files takes a moment
      const view::ExplorerRequest req = app.explorer_request;
      const view::ExplorerView grid = *app.explorer;
      const std::string dir = app.measurements_dir;
      app.explorer_runs_job.start([req, grid, dir] { return view::explorer_measured(req, grid, dir); });
    }
  }
  if (wait && app.tab == Tab::explorer) app.explorer_runs_job.wait(120);
  std::optional<std::vector<view::MeasuredCell>> runs;
  if (app.explorer_runs_job.take(runs, error) && runs) app.explorer_runs = std::move(*runs);
  if (wait && app.tab == Tab::explorer && app.explorer_colour == 1) {
    request_times(app);
    app.times_job.wait(240);
  }
  std::optional<std::vector<double>> times;
  if (app.times_job.take(times, error)) {
    app.times_error = error;
    if (times && app.explorer && times->size() == app.explorer->cells.size()) {
      for (std::size_t k = 0; k < times->size(); ++k) app.explorer->cells[k].predicted_s = (*times)[k];
      app.times_ready = true;
    }
  }
  // The Inside-the-SM tab sets the recorded on-chip counters of its problem beside its figures.
  const bool tab_reads_measured = app.tab == Tab::measured || app.tab == Tab::onchip;
  if (wait && app.tab == Tab::measured) {  // the lesson's own records; every record when asked
    request_measured(app);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    auto own_done = [&] {
      if (app.wait_for_all_measured || !app.measured_so_far) return false;
      const std::lock_guard<std::mutex> lock(app.measured_so_far->mutex);
      return app.measured_so_far->own_done && app.measured_so_far->report_key == app.measured_so_far->key();
    };
    while (app.measured_job.running() && !own_done() && std::chrono::steady_clock::now() < until)
      app.measured_job.wait(0.05);
  }
  if (wait && app.tab == Tab::onchip && !app.measured && app.replay[0]) {
    request_onchip_measured(app, app.replay[0]->result());
    app.onchip_measured_job.wait(240);
  }
  std::optional<ValidationReport> onchip;
  if (app.onchip_measured_job.take(onchip, error)) {
    app.onchip_measured = std::move(onchip);
    app.onchip_measured_error = error;
  }
  // In the page, whose one thread also draws, the Measured tab's records are predicted only while
  // the tab is shown (each can take a second), so that the lessons elsewhere stay fluid.
  const bool measured_advances = !platform::kBrowser || wait || tab_reads_measured;
  std::optional<ValidationReport> measured;
  if (measured_advances && app.measured_job.take(measured, error)) {
    app.measured = std::move(measured);
    app.measured_error = error;
  }
}

std::int64_t pos_b(const AppState& app) {
  if (!app.replay[0] || !app.replay[1]) return 0;
  const std::int64_t na = app.replay[0]->step_count(), nb = app.replay[1]->step_count();
  if (na == 0) return 0;
  return std::llround(double(app.play.pos) / double(na) * double(nb));
}

void jump_to(AppState& app, std::int64_t pos) {
  if (!app.replay[0]) return;
  app.play.pos = std::clamp<std::int64_t>(pos, 0, app.replay[0]->step_count());
  app.play.phase = 0;
}

void step_by(AppState& app, std::int64_t delta) {
  app.play.playing = false;
  jump_to(app, app.play.pos + delta);
}

void advance(AppState& app, double dt) {
  if (!app.play.playing || !app.replay[0]) return;
  app.play.phase += dt * app.play.speed;
  const double whole = std::floor(app.play.phase);
  app.play.phase -= whole;
  app.play.pos += static_cast<std::int64_t>(whole);
  if (app.play.pos >= app.replay[0]->step_count()) {
    app.play.pos = app.replay[0]->step_count();
    app.play.playing = false;
    app.play.phase = 0;
  }
}

}  // namespace hbmlab::viz
