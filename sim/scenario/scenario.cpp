// Reading workload and lesson files.
#include "sim/scenario/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <toml++/toml.h>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/common/error.hpp"
#include "sim/common/limits.hpp"
#include "sim/scenario/embedded.hpp"
#include "sim/spec/gpu_spec.hpp"

namespace hbmlab {
namespace {

class Reader {
public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  std::string at(const toml::node& node) const { return fmt::format("{}:{}", origin_, node.source().begin.line); }

  void only_keys(const toml::table& table, std::string_view prefix, std::set<std::string_view> allowed) const {
    for (auto&& [key, node] : table)
      if (!allowed.contains(key.str())) {
        std::string list;
        for (std::string_view a : allowed) list += fmt::format("{}{}", list.empty() ? "" : ", ", a);
        fail_input("{}: {}{}: unknown key (expected one of: {})", at(node), prefix, key.str(), list);
      }
  }

  std::string text(const toml::node& node, std::string_view key) const {
    const auto* s = node.as_string();
    if (!s) fail_input("{}: {}: expected a string", at(node), key);
    return s->get();
  }

  std::int64_t positive(const toml::node& node, std::string_view key) const {
    const auto* i = node.as_integer();
    if (!i) fail_input("{}: {}: expected a positive integer", at(node), key);
    if (i->get() <= 0) fail_input("{}: {}: must be a positive integer, got {}", at(node), key, i->get());
    return i->get();
  }

  double number(const toml::node& node, std::string_view key) const {
    if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
    const auto* f = node.as_floating_point();
    if (!f || !std::isfinite(f->get())) fail_input("{}: {}: expected a finite number", at(node), key);
    return f->get();
  }

  bool boolean(const toml::node& node, std::string_view key) const {
    const auto* b = node.as_boolean();
    if (!b) fail_input("{}: {}: expected true or false", at(node), key);
    return b->get();
  }

  Algo algo(const toml::node& node, std::string_view key) const {
    const std::string name = text(node, key);
    if (auto a = parse_algo(name)) return *a;
    fail_input("{}: {}: unknown algorithm '{}' (expected {})", at(node), key, name, algo_names(Pass::forward, " or "));
  }

private:
  std::string_view origin_;
};

void read_problem(const Reader& r, const toml::table& t, AttentionProblem& p) {
  r.only_keys(t, "problem.", {"batch", "heads", "seq_len", "head_dim", "dtype", "causal", "query_len", "kv_heads",
                              "block_mask", "splits", "unified_max"});
  for (auto&& [key, node] : t) {
    const std::string name = "problem." + std::string(key.str());
    if (key == "batch") p.batch = r.positive(node, name);
    else if (key == "heads") p.heads = r.positive(node, name);
    else if (key == "seq_len") p.seq_len = r.positive(node, name);
    else if (key == "head_dim") p.head_dim = r.positive(node, name);
    else if (key == "causal") p.causal = r.boolean(node, name);
    else if (key == "query_len") p.query_len = r.positive(node, name);
    else if (key == "kv_heads") p.kv_heads = r.positive(node, name);
    else if (key == "splits") p.kv_splits = r.positive(node, name);
    else if (key == "unified_max") p.unified_max = r.number(node, name);
    else if (key == "block_mask") {
      try {
        p.block_mask = parse_block_mask(r.text(node, name));
      } catch (const InputError& e) {
        throw InputError(problem_error_at(fmt::format("{}: problem", r.at(node)), e.what()));
      }
    }
    else if (key == "dtype") {
      const std::string dtype = r.text(node, name);
      const auto parsed = parse_dtype(dtype);
      if (!parsed) fail_input("{}: {}: unknown dtype '{}' (expected fp16, bf16 or fp32)", r.at(node), name, dtype);
      p.dtype = *parsed;
    }
  }
  // N and d are the problem: a file that leaves one out is refused rather than given a default.
  for (const auto& [key, what] : {std::pair{"seq_len", "the sequence length N, such as 1024"},
                                  std::pair{"head_dim", "the head dimension d, such as 64 or 128"}})
    if (!t.contains(key)) fail_input("{}: problem.{}: missing ({})", r.at(t), key, what);
  try {
    p.validate();
  } catch (const InputError& e) {
    throw InputError(problem_error_at(fmt::format("{}: problem", r.at(t)), e.what()));
  }
}

}  // namespace

Scenario parse_scenario(std::string_view toml_text, std::string_view origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    fail_input("{}:{}: {}", origin, e.source().begin.line, e.description());
  }
  const Reader r(origin);
  Scenario s;
  s.origin = std::string(origin);
  r.only_keys(root, "", {"workload", "lesson", "problem", "blocks", "stages"});

  const toml::table* head = root["lesson"].as_table();
  s.kind = head ? "lesson" : "workload";
  if (!head) head = root["workload"].as_table();
  if (!head) fail_input("{}:1: workload: missing table [workload] (or [lesson])", origin);
  if (root.contains("lesson") && root.contains("workload"))
    fail_input("{}: lesson: a file is a [lesson] or a [workload], not both", r.at(*root.get("lesson")));

  const std::string prefix = s.kind + ".";
  r.only_keys(*head, prefix, {"title", "summary", "number", "gpu", "algorithms", "pass", "sram_bytes"});
  for (auto&& [key, node] : *head) {
    const std::string name = prefix + std::string(key.str());
    if (key == "title") s.title = r.text(node, name);
    else if (key == "summary") s.summary = r.text(node, name);
    else if (key == "number") s.number = static_cast<int>(r.positive(node, name));
    else if (key == "gpu") {
      s.gpu = r.text(node, name);
      try {
        (void)load_gpu(s.gpu);  // the error names this key, not --gpu, which the user did not give
      } catch (const InputError& e) {
        std::string_view what = e.what();
        if (what.starts_with("--gpu: ")) what.remove_prefix(7);
        fail_input("{}: {}: {}", r.at(node), name, what);
      }
    }
    else if (key == "sram_bytes") {
      s.sram_bytes = r.positive(node, name);
      s.sram_bytes_where = fmt::format("{}: {}", r.at(node), name);
      if (*s.sram_bytes > kMaxSramBytes)
        fail_input("{}: {}: {} is outside 1 to {} bytes (1 GiB; a GPU has a few hundred KiB of SRAM per SM)", r.at(node),
                   name, *s.sram_bytes, kMaxSramBytes);
    }
    else if (key == "pass") {
      try {
        s.passes = parse_passes(r.text(node, name), name);
      } catch (const InputError& e) {
        fail_input("{}: {}", r.at(node), e.what());
      }
    }
    else if (key == "algorithms") {
      const auto* list = node.as_array();
      if (!list || list->empty()) fail_input("{}: {}: expected a list such as [\"standard\", \"flash1\"]", r.at(node), name);
      s.algorithms.clear();
      for (const toml::node& item : *list) s.algorithms.push_back(r.algo(item, name));
    }
  }
  if (s.title.empty()) fail_input("{}: {}title: missing", r.at(*head), prefix);

  const toml::table* problem = root["problem"].as_table();
  if (!problem) fail_input("{}:1: problem: missing table [problem]", origin);
  read_problem(r, *problem, s.problem);

  if (const toml::table* blocks = root["blocks"].as_table()) {
    r.only_keys(*blocks, "blocks.", {"rows", "cols"});
    if (const toml::node* n = blocks->get("rows")) s.block_rows = r.positive(*n, "blocks.rows");
    if (const toml::node* n = blocks->get("cols")) s.block_cols = r.positive(*n, "blocks.cols");
  }

  if (const toml::node* stages = root.get("stages")) {
    const auto* list = stages->as_array();
    if (!list) fail_input("{}: stages: expected [[stages]] tables", r.at(*stages));
    for (const toml::node& item : *list) {
      const auto* t = item.as_table();
      if (!t) fail_input("{}: stages: expected [[stages]] tables", r.at(item));
      r.only_keys(*t, "stages.",
                  {"title", "caption", "algorithm", "pass", "panel", "causal", "block_mask", "unified_max", "side_by_side",
                   "gpu"});
      LessonStage stage;
      for (auto&& [key, node] : *t) {
        const std::string name = "stages." + std::string(key.str());
        if (key == "title") stage.title = r.text(node, name);
        else if (key == "caption") stage.caption = r.text(node, name);
        else if (key == "algorithm") stage.algorithm = r.algo(node, name);
        else if (key == "pass") {
          const std::string text = r.text(node, name);
          stage.pass = parse_pass(text);
          if (!stage.pass) fail_input("{}: {}: unknown pass '{}' (expected forward or backward)", r.at(node), name, text);
        }
        else if (key == "causal") stage.causal = r.boolean(node, name);
        else if (key == "side_by_side") stage.side_by_side = r.boolean(node, name);
        else if (key == "block_mask") {
          stage.block_mask = r.text(node, name);
          try {
            if (!stage.block_mask->empty()) (void)parse_block_mask(*stage.block_mask);
          } catch (const InputError& e) {
            fail_input("{}: {}: {}", r.at(node), name, e.what());
          }
        }
        else if (key == "unified_max") stage.unified_max = r.number(node, name);
        else if (key == "gpu") {
          stage.gpu = r.text(node, name);
          const std::vector<std::string> presets = gpu_preset_names();
          if (std::find(presets.begin(), presets.end(), *stage.gpu) == presets.end())
            fail_input("{}: {}: no GPU preset named '{}'", r.at(node), name, *stage.gpu);
        }
        else if (key == "panel") {
          stage.panel = r.text(node, name);
          static const std::set<std::string, std::less<>> panels = {"memory",   "matrix",   "softmax", "io",
                                                                    "explorer", "timeline", "measured", "onchip"};
          if (!panels.contains(stage.panel))
            fail_input("{}: {}: unknown panel '{}' (expected memory, matrix, softmax, io, explorer, timeline, measured or onchip)",
                       r.at(node), name, stage.panel);
        }
      }
      if (stage.caption.empty()) fail_input("{}: stages.caption: missing", r.at(item));
      if (stage.pass && stage.algorithm && !parse_algo((*stage.algorithm)->name(), *stage.pass))
        fail_input("{}: stages.pass: {} has no {} pass in hbmlab (it has: {})", r.at(item), (*stage.algorithm)->name(),
                   to_string(*stage.pass), algo_names(*stage.pass));
      s.stages.push_back(std::move(stage));
    }
  }
  if (s.kind == "lesson" && s.stages.empty()) fail_input("{}:1: stages: a lesson needs at least one [[stages]]", origin);
  return s;
}

std::vector<Pass> parse_passes(std::string_view text, std::string_view where) {
  if (text == "both") return {Pass::forward, Pass::backward};
  if (const auto p = parse_pass(text)) return {*p};
  fail_input("{}: unknown pass '{}' (expected forward, backward or both)", where, text);
}

std::vector<Algo> rooms_of(const Scenario& s) {
  std::vector<Algo> rooms;
  for (Algo algo : s.algorithms)
    for (Pass pass : s.passes) {
      const auto room = parse_algo(algo->name(), pass);
      if (!room) fail_input("--pass: {} has no {} pass in hbmlab (it has: {})", algo->name(), to_string(pass),
                            algo_names(pass).empty() ? std::string("none") : algo_names(pass));
      rooms.push_back(*room);
    }
  return rooms;
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (std::string_view folder : {"lessons", "workloads"})
    for (std::string_view path : embedded_in(folder)) names.emplace_back(path.substr(0, path.rfind('.')));
  return names;
}

std::string lesson_name(std::int64_t number) {
  std::vector<std::string> lessons;
  for (const std::string& name : scenario_names())
    if (name.starts_with("lessons/")) lessons.push_back(name);
  const std::string prefix = fmt::format("lessons/{:02d}-", number);
  for (const std::string& name : lessons)
    if (number > 0 && name.starts_with(prefix)) return name;
  fail_input("--lesson: no lesson {} (the embedded lessons are numbered 1 to {})", number, lessons.size());
}

Scenario load_scenario(std::string_view name_or_path) {
  const std::string key(name_or_path);
  if (is_file(std::string(key))) return parse_scenario(read_text_file(key), key);
  for (const std::string& candidate : {key, "lessons/" + key, "workloads/" + key}) {
    const std::string path = candidate.ends_with(".toml") ? candidate : candidate + ".toml";
    if (auto text = find_embedded(path)) return parse_scenario(*text, "scenarios/" + path);
  }
  if (exists_on_disk(key)) (void)read_text_file(key);  // a folder: "PATH: cannot read: Is a directory"
  std::string known;
  for (const std::string& name : scenario_names()) known += fmt::format("{}{}", known.empty() ? "" : ", ", name);
  fail_input("--scenario: no file or embedded scenario '{}' (embedded: {})", key, known);
}

}  // namespace hbmlab
