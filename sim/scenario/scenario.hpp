// Scenarios: workloads (a problem on a GPU) and lessons (a workload with numbered, captioned
// stages) read from TOML, embedded (scenarios/workloads, scenarios/lessons) or from disk.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/algo/algorithm.hpp"
#include "sim/workload/problem.hpp"

namespace hbmlab {

struct LessonStage {
  std::string title;
  std::string caption;
  std::optional<Algo> algorithm;  // the algorithm this stage shows, if one (its forward room)
  std::optional<Pass> pass;       // the pass it shows (`pass = "backward"`); none: the pass on screen
  std::string panel;              // the GUI panel to bring forward: memory, matrix, softmax, io, explorer, timeline, measured, onchip
  std::optional<bool> side_by_side;  // the stage shows the lesson's second algorithm beside the first, or stops
  std::optional<bool> causal;             // the stage turns the causal mask on or off
  std::optional<std::string> block_mask;  // the stage's --block-mask SPEC ("" for none), checked on reading
  // FlashDecoding++'s φ for this stage only (a φ that makes rows fall back); a stage without it runs
  // the lesson's own problem.
  std::optional<double> unified_max;
  // A GPU preset for this stage only (lesson 4's Hopper stage runs its problem on an H100); the
  // others run the lesson's `gpu`.
  std::optional<std::string> gpu;
};

struct Scenario {
  std::string origin;  // file it came from, for messages
  std::string kind;    // "workload" or "lesson"
  std::string title;
  std::string summary;
  int number = 0;      // lessons are numbered
  std::string gpu = "a100-40gb";
  std::vector<Algo> algorithms = {default_algo()};  // forward rooms; `passes` picks the rooms that run
  std::vector<Pass> passes = {Pass::forward};
  AttentionProblem problem{1, 1, 1024, 64, Dtype::fp16, false};
  std::optional<std::int64_t> block_rows, block_cols;
  std::optional<std::int64_t> sram_bytes;
  std::string sram_bytes_where;  // "file:line: workload.sram_bytes", as errors about that SRAM name it
  std::vector<LessonStage> stages;
};

// "forward", "backward" or "both" (forward then backward); InputError naming `where` otherwise.
std::vector<Pass> parse_passes(std::string_view text, std::string_view where);

// The rooms a scenario runs: each algorithm in each pass (forward then backward for "both").
// InputError naming --pass when an algorithm has no room for a pass.
std::vector<Algo> rooms_of(const Scenario& scenario);

// Throws InputError "origin:line: key: what is wrong" for any unknown key or bad value.
Scenario parse_scenario(std::string_view toml_text, std::string_view origin);

// A path to a .toml file, or an embedded scenario by name: "gpt2-medium",
// "workloads/gpt2-medium", "01-why-standard-is-memory-bound" or "lessons/01-...".
Scenario load_scenario(std::string_view name_or_path);

// The lesson that `hbmlab` and `make run` open.
inline constexpr std::string_view kDefaultLesson = "lessons/01-why-standard-attention-is-memory-bound";

// Embedded scenario names ("lessons/01-...", "workloads/gpt2-medium"), lessons first.
std::vector<std::string> scenario_names();

// The embedded lesson numbered `number` ("lessons/03-..." for 3); InputError naming --lesson and the
// numbers there are when there is none.
std::string lesson_name(std::int64_t number);

}  // namespace hbmlab
