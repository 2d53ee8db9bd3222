// Bad input on every command, from one table: each case must end with exit code 2, nothing on
// standard output, one line on standard error that starts with the command and names the option (or
// the file and its key), and no output file left behind. The window's options are checked with a
// stand-in for the window that must never be opened.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sim/cli/cli.hpp"

using namespace hbmlab;
namespace fs = std::filesystem;

namespace {

// A folder of broken inputs: scenario and measurement files, a folder named like a file, empty files.
class BadFiles {
public:
  BadFiles() : dir_(fs::temp_directory_path() / fmt::format("hbmlab-bad-input-{}", ::getpid())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "folder.toml");
    fs::create_directories(dir_ / "folder.json");
    write("empty.toml", "");
    write("empty.json", "");
    write("wrong-type.toml", "[workload]\ntitle = \"x\"\n[problem]\nbatch = \"two\"\nseq_len = 1024\nhead_dim = 64\n");
    write("unknown-key.toml", "[workload]\ntitle = \"x\"\n[problem]\nseq_len = 1024\nhead_dim = 64\nbogus = 3\n");
    write("negative.toml", "[workload]\ntitle = \"x\"\n[problem]\nseq_len = 1024\nhead_dim = 64\nheads = -1\n");
    write("syntax.toml", "[workload\ntitle = \"x\"\n");
    write("gpu-wrong-type.toml", "name = \"g\"\n[numbers]\nsm_count = \"many\"\n");
    write("not-json.json", "not json");
    write("mask-4x4.txt", "1100\n0110\n0011\n1001\n");
    const nlohmann::json record = {
        {"kernel", "flash2"},
        {"problem", {{"batch", 1}, {"heads", 16}, {"seq_len", 1024}, {"head_dim", 64}, {"dtype", "fp16"}, {"causal", false}}},
        {"blocks", {{"Br", 128}, {"Bc", 64}}},
        {"time_ms_median", 0.1},
        {"dram_read_bytes", 1000000},
        {"dram_write_bytes", 1000000}};
    auto file_with = [&](const char* name, auto&& change) {
      nlohmann::json r = record;
      change(r);
      write(name, nlohmann::json{{"device", {{"name", "NVIDIA H100 80GB HBM3"}}}, {"records", {r}}}.dump());
    };
    file_with("valid.json", [](nlohmann::json&) {});
    file_with("missing-blocks.json", [](nlohmann::json& r) { r["blocks"].erase("Bc"); });
    file_with("missing-problem.json", [](nlohmann::json& r) { r.erase("problem"); });
    file_with("string-seq-len.json", [](nlohmann::json& r) { r["problem"]["seq_len"] = "1024"; });
    file_with("string-causal.json", [](nlohmann::json& r) { r["problem"]["causal"] = "yes"; });
    file_with("negative-time.json", [](nlohmann::json& r) { r["time_ms_median"] = -1; });
    file_with("unknown-kernel.json", [](nlohmann::json& r) { r["kernel"] = "flash9"; });
    // hbmlab's standard kernel multiplies 16 columns at a time: d = 7 once divided by zero.
    file_with("odd-head-dim.json", [](nlohmann::json& r) {
      r["kernel"] = "standard";
      r["problem"]["head_dim"] = 7;
      r["blocks"] = {{"Br", 64}, {"Bc", 64}};
    });
    // A calibration file's first SDPA record, without its B or with causal as a number.
    std::ifstream calibration(std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/calibration-h100.json");
    const nlohmann::json calibrated = nlohmann::json::parse(calibration);
    auto sdpa_with = [&](const char* name, auto&& change) {
      nlohmann::json r = calibrated.at("sdpa").at(0);
      change(r);
      write(name, nlohmann::json{{"device", calibrated.at("device")}, {"sdpa", {r}}}.dump());
    };
    sdpa_with("sdpa-without-B.json", [](nlohmann::json& r) { r.erase("B"); });
    sdpa_with("sdpa-causal-number.json", [](nlohmann::json& r) { r["causal"] = 1; });
    write("records-not-array.json", R"({"device": {"name": "NVIDIA H100 80GB HBM3"}, "records": "x"})");
    write("record-not-object.json", R"({"device": {"name": "NVIDIA H100 80GB HBM3"}, "records": [5]})");
  }
  ~BadFiles() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string operator()(const std::string& name) const { return (dir_ / name).string(); }

private:
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

struct Case {
  std::vector<std::string> args;
  std::string starts;  // what the line says first after "hbmlab COMMAND: "
  std::string output = {};  // a file the command must not leave behind (none when empty)
};

}  // namespace

TEST_CASE("bad input everywhere: exit 2, one line naming the option or file key, no output file", "[cli][errors]") {
  const BadFiles file;
  const std::string big = "1099511627776";  // 2^40
  const std::string out_file = file("out.csv");
  const std::vector<Case> cases = {
      // simulate: values missing, zero, negative, huge, of the wrong kind.
      {{"simulate", "--seq-len"}, "--seq-len: "},
      {{"simulate", "--seq-len", "0"}, "--seq-len: must be a positive integer"},
      {{"simulate", "--seq-len", big}, "--seq-len: " + big + " is more than hbmlab models"},
      {{"simulate", "--seq-len", big, "--counts-only"}, "--seq-len: "},
      {{"simulate", "--seq-len", "99999999999999999999"}, "--seq-len: '99999999999999999999' is outside the 64-bit whole numbers"},
      {{"gui", "--frames", "99999999999999999999"}, "--frames: "},
      {{"simulate", "--head-dim", "0"}, "--head-dim: "},
      {{"simulate", "--head-dim", "100000"}, "--head-dim: "},
      {{"simulate", "--heads", "-1"}, "--heads: must be a positive integer"},
      {{"simulate", "--heads", big}, "--heads: " + big + " is more than hbmlab models"},
      {{"simulate", "--batch", big}, "--batch: "},
      {{"simulate", "--block-rows", "0"}, "--block-rows: "},
      {{"simulate", "--block-cols", "-3"}, "--block-cols: "},
      {{"simulate", "--block-rows", big}, "--block-rows: "},
      {{"simulate", "--sram-bytes", big}, "--sram-bytes: "},
      {{"simulate", "--query-len", "5000"}, "--query-len: "},
      {{"simulate", "--kv-heads", "3", "--heads", "4"}, "--kv-heads: "},
      // The room that refuses a shape is named as the report heads it: flash2's forward takes NQ < N.
      {{"simulate", "--algo", "flash2", "--pass", "both", "--query-len", "1"},
       "--query-len: flash2 backward models self-attention only (NQ = N)"},
      {{"sweep", "--algo", "flash2", "--pass", "both", "--kv-heads", "2", "--heads", "4"},
       "--kv-heads: flash2 backward models one K/V head per query head"},
      {{"simulate", "--splits", "0"}, "--splits: "},
      {{"simulate", "--unified-max", "inf", "--algo", "flashdecoding++", "--query-len", "1"}, "--unified-max: "},
      {{"simulate", "--launch-threads", "0"}, "--launch-threads: "},
      // sweep checks the launch options as simulate does (one check for both).
      {{"sweep", "--launch-threads", "0"}, "--launch-threads: must be a positive integer, got 0"},
      {{"sweep", "--algo", "standard", "--launch-registers", "64"}, "--launch-registers: standard launches library GEMMs"},
      {{"sweep", "--algo", "flash3", "--launch-threads", "64"}, "--launch-threads: flash3 sets its own threads per CTA ("},
      {{"simulate", "--algo", "flash3", "--pass", "backward", "--launch-threads", "64"},
       "--launch-threads: flash3 backward sets its own threads per CTA ("},
      {{"sweep", "--algo", "flash2", "--launch-smem-bytes", "999999"},
       "--launch-smem-bytes: 999999 B per CTA are more than one CTA may use on a100-40gb (166912 B)"},
      {{"sweep", "--algo", "flash2", "--sram-bytes", "65536,131072", "--launch-smem-bytes", "100000"},
       "--launch-smem-bytes: 100000 B per CTA are more than one CTA may use on a100-40gb (65536 B)"},
      {{"sweep", "--algo", "flash2", "--block-rows", "64", "--block-cols", "64", "--launch-registers", "255",
        "--launch-threads", "1024"}, "--launch-registers: scenarios/gpus/a100-40gb.toml: numbers.registers_per_sm: "},
      {{"simulate", "--launch-registers", "100000"}, "--launch-registers: a thread holds at most 255 registers"},
      {{"simulate", "--steps", "--steps-limit", "-1"}, "--steps-limit: "},
      {{"simulate", "--algo", "standard", "--hbmlab-kernels", "--head-dim", "24"}, "--hbmlab-kernels: "},
      // A d no kernel of gpu/ is compiled for: no tile shape to run (sim/algo/kernel_tiles.hpp).
      {{"simulate", "--algo", "flash2", "--hbmlab-kernels", "--head-dim", "96"},
       "--hbmlab-kernels: flash2 has no CUDA kernel in gpu/ for d = 96 (hbmlab's kernels are compiled for d = 64 and 128)"},
      {{"simulate", "--algo", "standard", "--hbmlab-kernels", "--seq-len", "65536"},
       "--hbmlab-kernels: standard has no CUDA kernel in gpu/ whose row of S, N × 4 B = 262144 B at --seq-len 65536, "
       "fits the 166912 B one CTA may use"},
      {{"simulate", "--algo", "flash1,flash2", "--hbmlab-kernels", "--block-mask", "butterfly", "--sram-bytes", "16384"},
       "--hbmlab-kernels: flash1 and flash2 have no CUDA kernel in gpu/ for a block mask (flash1) or at d = 64 whose "
       "tiles fit the 16384 B one CTA may use (flash2); sim/algo/kernel_tiles.hpp says what each kernel takes"},
      {{"simulate", "--algo", "standard", "--hbmlab-kernels", "--block-cols", "512", "--sram-bytes", "200000"},
       "--block-cols: --sram-bytes: 200000 B cannot hold one tile set of pv_kernel O = PV"},
      // No room of the list has a kernel in gpu/ (a list with one that has runs the others on their reference launch).
      {{"simulate", "--algo", "flash1", "--pass", "backward", "--hbmlab-kernels"},
       "--hbmlab-kernels: flash1 backward has no CUDA kernel in gpu/ (standard, flash1, flash2, flash3, flash-decoding and flashdecoding++ have one)"},
      // A problem no kernel of the list is compiled for, as `hbmlab measure` refuses it (sim/algo/kernel_tiles.hpp).
      {{"simulate", "--algo", "flash2", "--hbmlab-kernels", "--dtype", "fp32"},
       "--hbmlab-kernels: flash2 has no CUDA kernel in gpu/ for fp32 (hbmlab's kernels are compiled for fp16 and bf16)"},
      {{"simulate", "--algo", "flash1", "--hbmlab-kernels", "--query-len", "1"},
       "--hbmlab-kernels: flash1 has no CUDA kernel in gpu/ for NQ < N (flash-decoding and flashdecoding++ have one)"},
      {{"simulate", "--algo", "standard", "--hbmlab-kernels", "--heads", "4", "--kv-heads", "1"},
       "--hbmlab-kernels: standard has no CUDA kernel in gpu/ for HKV < H (flash3, flash-decoding and flashdecoding++ have one)"},
      {{"simulate", "--algo", "flash1", "--hbmlab-kernels", "--block-mask", "butterfly"},
       "--hbmlab-kernels: flash1 has no CUDA kernel in gpu/ for a block mask (flash2 and flash3 have one)"},
      // A CTA the GPU cannot hold is the blocks' doing (flash3's paper blocks at d = 8: 17 warpgroups).
      // (the blocks are the paper's rule's, no option's: the preset's key is named).
      {{"simulate", "--algo", "flash3", "--head-dim", "8"}, "scenarios/gpus/a100-40gb.toml: numbers.max_threads_per_sm: "},
      // The option given is named, not one that was not (standard's kernel at Bc = 512: pv_kernel's tiles).
      {{"simulate", "--algo", "standard", "--hbmlab-kernels", "--block-cols", "512"},
       "--block-cols: scenarios/gpus/a100-40gb.toml: numbers.sram_bytes_per_block: "},
      {{"simulate", "--algo", "flash2", "--launch-registers", "255", "--launch-threads", "1024"},
       "--launch-registers: scenarios/gpus/a100-40gb.toml: numbers.registers_per_sm: "},
      {{"simulate", "--head-dim", "-5"}, "--head-dim"},
      {{"simulate", "--seq-len", "abc"}, "--seq-len"},
      {{"simulate", "--algo", "flash4"}, "--algo"},
      {{"simulate", "--dtype", "fp8"}, "--dtype"},
      {{"simulate", "--gpu", "toy", "--seq-len", "64", "--head-dim", "64", "--block-rows", "64", "--block-cols", "64"}, "--block-cols"},
      {{"simulate", "--sram-bytes", "0"}, "--sram-bytes"},
      {{"simulate", "--numerics", "maybe"}, "--numerics"},
      {{"simulate", "--scenario", "no-such-lesson"}, "--scenario"},
      {{"simulate", "--bogus"}, "--bogus"},
      {{"bounds", "--seq-lens", "64,x"}, "--seq-lens"},
      {{"bounds", "--json", "--csv"}, "--csv: choose one of --json and --csv"},
      {{"bounds", "--seq-lens", "1024"}, "--seq-lens: a fit needs at least two different values"},
      {{"bounds", "--head-dims", "64,64"}, "--head-dims: a fit needs at least two different values"},
      {{"bounds", "--head-dims", "64,99999"}, "--head-dims: 99999 is more than hbmlab models"},
      {{"bounds", "--seq-lens", "1024,99999999"}, "--seq-lens: 99999999 is more than hbmlab models"},
      {{"sweep", "--block-rows", "0"}, "--block-rows"},
      {{"simulate", "--seed", "-1"}, "--seed"},
      {{"simulate", "--launch-threads", "5000"}, "--launch-threads"},
      {{"simulate", "--launch-smem-bytes", "999999999"}, "--launch-smem-bytes"},
      {{"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4", "--launch-smem-bytes", "300"}, "--launch-smem-bytes"},
      // Names longer than the file system takes (a fuzzed mask spec once ended hbmlab here).
      {{"simulate", "--block-mask", "butterfly" + std::string(300, '1')}, "--block-mask"},
      {{"simulate", "--scenario", std::string(300, 'a')}, "--scenario"},
      {{"simulate", "--gpu", std::string(300, 'a') + ".toml"}, "--gpu"},
      // Names that name nothing.
      {{"simulate", "--gpu", "v100"}, "--gpu: unknown preset"},
      {{"simulate", "--algo", "flash9"}, "--algo: unknown algorithm"},
      {{"simulate", "--algo", "flash1,"}, "--algo: "},
      {{"simulate", "--pass", "sideways"}, "--pass: "},
      {{"simulate", "--scenario", "no-such-scenario"}, "--scenario: "},
      {{"simulate", "--block-mask", "random:2"}, "--block-mask: "},
      // Files: missing, a folder, empty, of the wrong shape.
      {{"simulate", "--scenario", file("missing.toml")}, "--scenario: "},
      {{"simulate", "--scenario", file("folder.toml")}, file("folder.toml") + ": cannot read"},
      {{"simulate", "--scenario", file("empty.toml")}, file("empty.toml") + ":1: workload: "},
      {{"simulate", "--scenario", file("wrong-type.toml")}, file("wrong-type.toml") + ":4: problem.batch: "},
      {{"simulate", "--scenario", file("unknown-key.toml")}, file("unknown-key.toml") + ":6: problem.bogus: unknown key"},
      {{"simulate", "--scenario", file("negative.toml")}, file("negative.toml") + ":6: problem.heads: "},
      {{"simulate", "--scenario", file("syntax.toml")}, file("syntax.toml") + ":1: "},
      {{"simulate", "--gpu", file("folder.toml")}, file("folder.toml") + ": cannot read"},
      {{"simulate", "--gpu", file("empty.toml")}, file("empty.toml") + ":1: name: missing"},
      {{"simulate", "--gpu", file("gpu-wrong-type.toml")}, file("gpu-wrong-type.toml") + ":3: numbers.sm_count: "},
      {{"simulate", "--block-mask", file("folder.json")}, file("folder.json") + ": cannot read"},
      {{"simulate", "--block-mask", file("empty.toml")}, file("empty.toml") + ":1: "},
      {{"simulate", "--timeline", file("folder.json"), "--algo", "flash1"}, "--timeline: "},
      {{"simulate", "--mask-out", file("missing-dir/x.txt"), "--algo", "flash1"}, "--mask-out: ", file("missing-dir/x.txt")},
      // bounds
      {{"bounds", "--seq-lens"}, "--seq-lens: "},
      {{"bounds", "--seq-lens", "0,1024"}, "--seq-lens: "},
      {{"bounds", "--head-dims", "0,64"}, "--head-dims: "},
      {{"bounds", "--seq-len", "0"}, "--seq-len: "},
      {{"bounds", "--sram-elements", big + ",1099511627777"}, "--sram-elements: M = " + big + " elements is more than N·d"},
      {{"bounds", "--sram-elements", "16,65536"}, "--sram-elements: M = 16 elements is less than d = 64"},
      {{"bounds", "--sram-element-count", big}, "--sram-element-count: "},
      {{"bounds", "--tolerance", "-1"}, "--tolerance: "},
      {{"bounds", "--densities", "0,1"}, "--densities: "},
      {{"bounds", "--algo", "flash9"}, "--algo: "},
      // sweep
      {{"sweep", "--block-rows", "0"}, "--block-rows: "},
      {{"sweep", "--sram-bytes", big}, "--sram-bytes: "},
      {{"sweep", "--head-dim", "0"}, "--head-dim: "},
      {{"sweep", "--splits", "auto"}, "--splits: "},
      {{"sweep", "--seq-len", "0", "--out", out_file}, "--seq-len: ", out_file},
      {{"sweep", "--out", file("folder.json")}, "--out: "},
      // An option that no room of the list takes, on every command of a room list (simulate's too).
      {{"simulate", "--algo", "standard", "--block-mask", "butterfly"}, "--block-mask: standard does not take a block mask"},
      {{"sweep", "--algo", "standard", "--block-mask", "butterfly"}, "--block-mask: standard does not take a block mask"},
      {{"sweep", "--algo", "standard,flash-decoding", "--query-len", "1", "--block-mask", "butterfly", "--out", out_file},
       "--block-mask: standard and flash-decoding do not take a block mask (flash1, flash2 and flash3 do)", out_file},
      {{"sweep", "--algo", "flash1", "--query-len", "1", "--splits", "2"}, "--splits: flash1 does not split the K/V cache"},
      {{"sweep", "--algo", "flash1,flash-decoding", "--query-len", "1", "--unified-max", "3"},
       "--unified-max: flash1 and flash-decoding do not take a unified max (flashdecoding++ takes one)"},
      {{"sweep", "--algo", "standard,flash1", "--kv-descending"},
       "--kv-descending: standard and flash1 have no K/V order to reverse (flash2 has one)"},
      {{"sweep", "--json", "--csv"}, "--csv: choose one of --json and --csv"},
      // A mask file fits one grid; a sweep over blocks that make another is refused, not read past its rows.
      {{"sweep", "--gpu", "toy", "--seq-len", "32", "--head-dim", "4", "--algo", "flash2", "--block-mask",
        file("mask-4x4.txt"), "--block-rows", "4,8", "--block-cols", "4,8"},
       file("mask-4x4.txt") + ": 4 rows of 4 columns, but the blocks make Tr × Tc = 8 × 8"},
      {{"bounds", "--algo", "standard", "--pass", "both", "--densities", "0.5,1"},
       "--densities: standard and standard backward do not take a block mask"},
      // validate: files missing, empty, a folder, not JSON, records of the wrong shape.
      {{"validate"}, "--measurements"},
      {{"validate", "--measurements", file("missing.json")}, file("missing.json") + ": cannot read"},
      {{"validate", "--measurements", file("empty.json")}, file("empty.json") + ": not JSON: "},
      {{"validate", "--measurements", file("not-json.json")}, file("not-json.json") + ": not JSON: "},
      {{"validate", "--measurements", file("folder.json")}, "--measurements: " + file("folder.json") + ": no *.json"},
      {{"validate", "--measurements", file("missing-blocks.json")}, file("missing-blocks.json") + ": records[0].blocks.Bc: missing"},
      {{"validate", "--measurements", file("missing-problem.json")}, file("missing-problem.json") + ": records[0].problem: missing"},
      {{"validate", "--measurements", file("string-seq-len.json")}, file("string-seq-len.json") + ": records[0].problem.seq_len: "},
      {{"validate", "--measurements", file("string-causal.json")}, file("string-causal.json") + ": records[0].problem.causal: "},
      {{"validate", "--measurements", file("negative-time.json")}, file("negative-time.json") + ": records[0].time_ms_median: "},
      {{"validate", "--measurements", file("unknown-kernel.json")}, file("unknown-kernel.json") + ": records[0].kernel: "},
      // A record of hbmlab's kernel at a d it is not compiled for is refused before the engine runs it.
      {{"validate", "--measurements", file("odd-head-dim.json")},
       file("odd-head-dim.json") + ": records[0]: standard's CUDA kernel in gpu/ is compiled for d = 64 and 128, not d = 7"},
      {{"validate", "--measurements", file("sdpa-without-B.json")}, file("sdpa-without-B.json") + ": sdpa[0].B: missing"},
      {{"validate", "--measurements", file("sdpa-causal-number.json")}, file("sdpa-causal-number.json") + ": sdpa[0].causal: "},
      {{"validate", "--measurements", file("records-not-array.json")}, file("records-not-array.json") + ": records: "},
      {{"validate", "--measurements", file("record-not-object.json")}, file("record-not-object.json") + ": records[0]: "},
      {{"validate", "--measurements", file("valid.json"), "--gpu", "v100"}, "--gpu: "},
      {{"validate", "--measurements", file("valid.json"), "--time-within", "0"}, "--time-within: "},
      // presets, gui and the command itself
      {{"presets", "--gpu", "x"}, "--gpu: unknown preset 'x'"},
      {{"presets", "--seq-len", "x"}, "--seq-len x: not expected"},
      {{"presets", "--json", "x"}, "--json: takes no value, got 'x'"},
      {{"simulate", "--causal", "yes"}, "--causal: takes no value, got 'yes'"},
      {{"sweep", "--no-l2", "1", "--seq-len", "1024"}, "--no-l2: takes no value, got '1'"},
      {{"gui", "--frames", "-1"}, "--frames: "},
      {{"gui", "--frames"}, "--frames: "},
      {{"gui", "--ui-scale", "100"}, "--ui-scale: "},
      {{"gui", "--width", "10"}, "--width: "},
      {{"gui", "--height", "0"}, "--height: "},
      {{"gui", "--lesson", "0"}, "--lesson: "},
      {{"gui", "--lesson", "99"}, "--lesson: "},
      {{"gui", "--scenario", "no-such-scenario"}, "--scenario: "},
      {{"gui", "--scenario", file("folder.toml")}, file("folder.toml") + ": cannot read"},
      {{"gui", "--scenario", file("empty.toml")}, file("empty.toml") + ":1: "},
      {{"gui", "--stage", "0"}, "--stage: "},
      {{"gui", "--scenario", "gpt2-medium", "--stage", "1"}, "--stage: "},
      {{"frobnicate"}, "frobnicate: not expected"},
  };
  bool window_opened = false;
  Frontends frontends;
  frontends.gui = [&](const GuiOptions&) {
    window_opened = true;
    return 0;
  };
  for (const Case& c : cases) {
    INFO(fmt::format("hbmlab {}", fmt::join(c.args, " ")));
    std::ostringstream out, err;
    const int code = run_cli(c.args, out, err, frontends);
    const std::string command = c.args.front() == "frobnicate" ? "" : " " + c.args.front(), line = err.str();
    CHECK(code == 2);
    CHECK(out.str().empty());
    CHECK(std::count(line.begin(), line.end(), '\n') == 1);
    CHECK(line.ends_with("\n"));
    CHECK_THAT(line, Catch::StartsWith(fmt::format("hbmlab{}: {}", command, c.starts)));
    if (!c.output.empty()) CHECK_FALSE(fs::exists(c.output));
    CHECK_FALSE(window_opened);
  }
}
