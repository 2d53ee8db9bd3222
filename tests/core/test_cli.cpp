// The CLI in-process: JSON per the contract, text reports, and one-line errors with exit code 2.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <tuple>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sim/algo/block_sparse/masks.hpp"
#include "sim/cli/cli.hpp"
#include "tests/core/cli_run.hpp"
#include "sim/common/error.hpp"
#include "sim/common/files.hpp"
#include "sim/common/units.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/spec/gpu_spec.hpp"

using namespace hbmlab;
using hbmlab::testing::Run;
using hbmlab::testing::run;

namespace {

// A command's base arguments with a case's own after them.
Run run_with(std::vector<std::string> args, const std::vector<std::string>& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return run(args);
}

// The rooms of a --hbmlab-kernels --json run: those `reference` names are timed on their reference
// launch with `note` and, the note aside, print what `plain(room)` (the run without the option) does;
// the others run hbmlab's kernels and carry no note.
void check_reference_rooms(const nlohmann::json& rooms, const std::function<bool(const nlohmann::json&)>& reference,
                           const std::string& note,
                           const std::function<std::vector<std::string>(const nlohmann::json&)>& plain) {
  for (const auto& room : rooms) {
    INFO(room["algorithm"] << " " << room.value("pass", "forward"));
    const bool by_reference = reference(room);
    CHECK(room["time"]["launch"] == (by_reference ? "reference" : "hbmlab-kernels"));
    CHECK(room.contains("notes") == by_reference);
    if (!by_reference) continue;
    CHECK(room["notes"] == nlohmann::json::array({note}));
    nlohmann::json alone = room;
    alone.erase("notes");
    CHECK(alone == nlohmann::json::parse(run(plain(room)).out));
  }
}

// simulate() called directly on a room's kernel (--hbmlab-kernels) at N = 1024 and d, counts only timed.
SimulateRequest kernel_request(std::string_view room, std::int64_t d) {
  SimulateRequest request;
  request.algo = algo_named(room);
  request.problem.seq_len = 1024;
  request.problem.head_dim = d;
  request.numerics = NumericsMode::off;
  request.launch.hbmlab_kernels = true;
  return request;
}

bool one_line(const std::string& text) {
  return !text.empty() && text.back() == '\n' && std::count(text.begin(), text.end(), '\n') == 1;
}

}  // namespace

TEST_CASE("simulate --json follows the contract", "[cli]") {
  const Run r = run({"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4", "--algo", "flash1", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["gpu"]["name"] == "toy");
  CHECK(j["gpu"]["sram_bytes_per_sm"] == 256);
  CHECK(j["problem"]["seq_len"] == 16);
  CHECK(j["problem"]["dtype"] == "fp16");
  CHECK(j["algorithm"] == "flash1");
  CHECK(j["blocks"]["Br"] == 4);
  CHECK(j["blocks"]["Bc"] == 8);
  CHECK(j["blocks"]["Tr"] == 4);
  CHECK(j["blocks"]["Tc"] == 2);
  CHECK(j["sram_working_set_bytes"] == 224);
  // Hand-worked in test_io_exact.cpp: reads 128+128+256+256+128+128, writes 384+192+192.
  CHECK(j["hbm"]["read_bytes"] == 1024);
  CHECK(j["hbm"]["write_bytes"] == 768);
  CHECK(j["hbm"]["by_tensor"]["O"]["write_bytes"] == 384);
  CHECK(j["hbm"]["by_tensor"]["l"]["read_bytes"] == 128);
  CHECK_FALSE(j["hbm"]["by_tensor"].contains("S"));
  for (const char* key : {"flops", "bound", "numerics", "time", "l2", "dram"}) CHECK(j.contains(key));
  CHECK(j["bound"]["expression"] == "N^2 d^2 / M");
  CHECK(j["numerics"]["checked"] == true);
  CHECK(j["numerics"]["max_abs_error_vs_reference"].get<double>() < 1e-5);
}

TEST_CASE("simulate with several algorithms prints a JSON array and a comparison", "[cli]") {
  const Run json = run({"simulate", "--scenario", "toy-16", "--json"});
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.is_array());
  CHECK(j.size() == 3);
  const Run text = run({"simulate", "--scenario", "gpt2-medium", "--numerics", "off"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("standard") && Catch::Contains("flash2") && Catch::Contains("vs first"));
}

TEST_CASE("simulate --steps narrates the replay", "[cli]") {
  const Run r = run({"simulate", "--scenario", "toy-16", "--algo", "flash1", "--steps"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("line 6: load K_1 (8×4, 64 B) from HBM into SRAM"));
  CHECK_THAT(r.out, Catch::Contains("112 in all"));
}

TEST_CASE("simulate --counts-only: the paper's counts with a roofline time", "[cli]") {
  const Run full = run({"simulate", "--scenario", "gpt2-medium", "--algo", "flash1", "--json"});
  const Run counts = run({"simulate", "--scenario", "gpt2-medium", "--algo", "flash1", "--json", "--counts-only"});
  REQUIRE(full.code == 0);
  REQUIRE(counts.code == 0);
  const auto f = nlohmann::json::parse(full.out), c = nlohmann::json::parse(counts.out);
  CHECK(c["hbm"] == f["hbm"]);
  CHECK(c["time"]["model"] == "roofline");
  CHECK(f["time"]["model"] == "engine");
  CHECK(c["l2"]["enabled"] == false);
  CHECK(c["dram"]["read_bytes"] == c["hbm"]["read_bytes"]);
  CHECK(c["numerics"]["checked"] == false);
  CHECK(run({"simulate", "--counts-only", "--timeline", "t.json"}).code == 2);
}

TEST_CASE("simulate --counts-only --json leaves out the grid, which only the timing engine plans", "[cli]") {
  // flash3's persistent grid: 132 CTAs walk the tiles on an H100; counts alone cannot say 132.
  const std::vector<std::string> args = {"simulate", "--gpu", "h100-sxm", "--algo", "flash3", "--seq-len", "4096",
                                         "--batch", "4", "--heads", "16", "--json", "--numerics", "off"};
  std::vector<std::string> counts_args(args.begin(), args.end() - 2);
  counts_args.push_back("--counts-only");
  const Run timed = run(args), counts = run(counts_args);
  REQUIRE(timed.code == 0);
  REQUIRE(counts.code == 0);
  const auto t = nlohmann::json::parse(timed.out)["time"], c = nlohmann::json::parse(counts.out)["time"];
  CHECK(t["ctas"] == 132);
  CHECK(t["tiles"].get<std::int64_t>() > 132);
  CHECK(c["model"] == "roofline");
  for (const char* key : {"ctas", "tiles", "ctas_per_sm", "waves"}) {
    INFO(key);
    CHECK(t.contains(key));
    CHECK_FALSE(c.contains(key));
  }
  CHECK(c["kernels"].empty());
  CHECK(c["predicted_s"].get<double>() > 0);
}

TEST_CASE("flags override a scenario", "[cli]") {
  const Run r = run({"simulate", "--scenario", "gpt2-medium", "--algo", "flash2", "--batch", "1", "--heads", "1", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["problem"]["batch"] == 1);
  CHECK(j["problem"]["seq_len"] == 1024);
  CHECK(j["gpu"]["name"] == "a100-40gb");
}

TEST_CASE("a value of the wrong kind is named with its option first", "[cli][errors]") {
  CHECK(run({"simulate", "--seq-len", "1e9"}).err == "hbmlab simulate: --seq-len: '1e9' is not a whole number\n");
  CHECK(run({"simulate", "--unified-max", "abc"}).err == "hbmlab simulate: --unified-max: 'abc' is not a number\n");
  CHECK(run({"gui", "--frames", "many"}).err == "hbmlab gui: --frames: 'many' is not a whole number\n");
  CHECK(run({"validate", "--measurements", "x.json", "--dram-within", "5%"}).err ==
        "hbmlab validate: --dram-within: '5%' is not a number\n");
}

TEST_CASE("an output file that cannot be written is refused naming its option", "[cli][errors]") {
  const std::string dir = "/nonexistent-hbmlab-dir/";
  const std::vector<std::string> toy = {"--gpu", "toy", "--seq-len", "16", "--head-dim", "4"};
  for (const auto& [command, option] : {std::pair<std::string, std::string>{"simulate", "--timeline"},
                                        {"simulate", "--mask-out"}, {"sweep", "--out"}}) {
    std::vector<std::string> args = {command, option, dir + "x"};
    args.insert(args.end(), toy.begin(), toy.end());
    const Run r = run(args);
    INFO(command << " " << option);
    CHECK(r.code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::StartsWith("hbmlab " + command + ": " + option + ": " + dir + "x: cannot write"));
  }
  // `hbmlab measure --out` asks before it runs anything (check_output), in the same words, and leaves nothing.
  auto refusal = [](const std::string& path) {
    try {
      check_output("--out", path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refusal(dir + "x") == "--out: " + dir + "x: cannot write: No such file or directory");
  const std::filesystem::path folder = std::filesystem::temp_directory_path() / "hbmlab-check-output";
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  CHECK(refusal(folder.string()) == "--out: " + folder.string() + ": cannot write: Is a directory");
  CHECK(refusal((folder / "records.json").string()).empty());
  CHECK(std::filesystem::is_empty(folder));
  std::filesystem::remove_all(folder);
}

TEST_CASE("an option that would change nothing in the run is refused naming it, not ignored", "[cli][errors]") {
  const std::vector<std::string> toy = {"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4"};
  auto refusal = [&](std::vector<std::string> extra) {
    const Run r = run_with(toy, extra);
    INFO(fmt::format("{}", fmt::join(extra, " ")));
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(one_line(r.err));
    return r.err;
  };
  const std::string head = "hbmlab simulate: ";
  // A room with no K/V order to reverse; flash3's plan is flash2's, but its kernels keep their own order.
  for (const char* algo : {"flash1", "flash3", "standard"})
    CHECK(refusal({"--algo", algo, "--kv-descending"}) ==
          head + "--kv-descending: " + algo + " has no K/V order to reverse (flash2 has one)\n");
  // Refused when no room of the list takes it; a list with one that does is run (next test case).
  CHECK(refusal({"--algo", "standard,flash1", "--kv-descending"}) ==
        head + "--kv-descending: standard and flash1 have no K/V order to reverse (flash2 has one)\n");
  CHECK(refusal({"--algo", "flash1", "--pass", "backward", "--kv-descending"}) ==
        head + "--kv-descending: flash1 backward has no K/V order to reverse (flash2 has one)\n");
  CHECK(refusal({"--algo", "standard,flash1", "--pass", "backward", "--hbmlab-kernels"}) ==
        head + "--hbmlab-kernels: standard backward and flash1 backward have no CUDA kernel in gpu/ (standard, flash1, "
               "flash2, flash3, flash-decoding and flashdecoding++ have one)\n");
  CHECK(refusal({"--algo", "standard", "--pass", "both", "--launch-registers", "64"}) ==
        head + "--launch-registers: standard and standard backward launch library GEMMs, whose launch hbmlab does not "
               "set (the other rooms take it)\n");
  // flash3's threads are its warpgroups, which its blocks set.
  CHECK(refusal({"--algo", "standard,flash3", "--pass", "both", "--launch-threads", "64"}) ==
        head + "--launch-threads: standard, standard backward, flash3 and flash3 backward set their own threads per CTA "
               "(flash1, flash2, flash-decoding and flashdecoding++ take it)\n");
  // What only the timing engine uses, under --counts-only.
  for (const std::vector<std::string>& option :
       {std::vector<std::string>{"--hbmlab-kernels"}, {"--kv-descending"}, {"--no-l2"}, {"--launch-threads", "64"},
        {"--launch-registers", "64"}, {"--launch-smem-bytes", "64"}, {"--timeline", "t.json"}}) {
    std::vector<std::string> extra = {"--algo", "flash2", "--counts-only"};
    extra.insert(extra.end(), option.begin(), option.end());
    CHECK(refusal(extra) == head + option.front() + ": needs the timing engine, not --counts-only\n");
  }
  CHECK(run({"simulate", "--algo", "flash-decoding", "--seq-len", "4096", "--query-len", "1", "--splits", "auto",
             "--counts-only"}).err == head + "--splits auto: needs the timing engine, not --counts-only\n");
  CHECK(refusal({"--counts-only", "--numerics", "full"}) == head + "--numerics: --counts-only checks no numerics\n");
  CHECK(refusal({"--counts-only", "--seed", "3"}) == head + "--seed: seeds the numerics check, which --counts-only skips\n");
  CHECK(refusal({"--numerics", "off", "--seed", "3"}) == head + "--seed: seeds the numerics check, which --numerics off skips\n");
  CHECK(refusal({"--steps-limit", "3"}) == head + "--steps-limit: goes with --steps\n");
  CHECK(refusal({"--steps", "--json"}) == head + "--steps: narrates in the text report, not with --json\n");
  CHECK(refusal({"--steps", "--csv"}) == head + "--steps: narrates in the text report, not with --csv\n");
  // standard's GEMMs are a library's: their threads, registers and shared memory are not hbmlab's to set.
  CHECK(refusal({"--algo", "standard", "--launch-registers", "128"}) ==
        head + "--launch-registers: standard launches library GEMMs, whose launch hbmlab does not set (the other rooms take it)\n");
  // Each of these is taken where it means something (--hbmlab-kernels where a kernel is compiled for d).
  std::vector<std::string> fine = toy;
  for (const char* option : {"--algo", "flash2", "--kv-descending", "--launch-registers", "128", "--seed", "3", "--steps",
                             "--steps-limit", "3", "--no-l2"})
    fine.push_back(option);
  const Run ok = run(fine);
  CHECK(ok.code == 0);
  CHECK(ok.err.empty());
  const Run kernel = run({"simulate", "--seq-len", "256", "--algo", "flash2", "--kv-descending", "--launch-registers",
                          "128", "--seed", "3", "--steps", "--steps-limit", "3", "--hbmlab-kernels", "--no-l2"});
  CHECK(kernel.code == 0);
  CHECK(kernel.err.empty());
  std::vector<std::string> counts = toy;
  for (const char* option : {"--algo", "flash2", "--counts-only", "--numerics", "off", "--steps"}) counts.push_back(option);
  CHECK(run(counts).code == 0);
  // bounds: a density sweep needs a room that takes a block mask.
  CHECK(run({"bounds", "--algo", "standard", "--densities", "0.5,1"}).err ==
        "hbmlab bounds: --densities: standard does not take a block mask (flash1, flash2 and flash3 do)\n");
}

TEST_CASE("an option some rooms of the list take: applied to those, a note names the others", "[cli]") {
  const std::vector<std::string> toy = {"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4"};
  auto with = [&](std::vector<std::string> extra) {
    return run_with(toy, extra);
  };
  // The text report opens with the note; flash2's figures are those of flash2 run alone.
  const Run all = with({"--algo", "all", "--kv-descending"});
  REQUIRE(all.code == 0);
  CHECK(all.err.empty());
  CHECK(all.out.starts_with(
      "note: --kv-descending applies to flash2; standard, flash1 and flash3 have no K/V order to reverse\n\n"));
  const Run json = with({"--algo", "all", "--kv-descending", "--json"});
  const Run alone = with({"--algo", "flash2", "--kv-descending", "--json"});
  REQUIRE(json.code == 0);
  REQUIRE(alone.code == 0);
  const auto j = nlohmann::json::parse(json.out), a = nlohmann::json::parse(alone.out);
  REQUIRE(j.size() == 4);
  CHECK(j[2]["algorithm"] == "flash2");
  CHECK(j[2] == a);  // no note where the option applies
  CHECK_FALSE(a.contains("notes"));
  // The rooms that ignore it carry the note, and their figures are those of a run without the option.
  const Run flash1 = with({"--algo", "flash1", "--json"});
  auto f1 = nlohmann::json::parse(flash1.out);
  REQUIRE(j[1]["notes"].size() == 1);
  CHECK(j[1]["notes"][0] == "--kv-descending applies to flash2; standard, flash1 and flash3 have no K/V order to reverse");
  nlohmann::json j1 = j[1];
  j1.erase("notes");
  CHECK(j1 == f1);
  // The option reached flash2, and only flash2: its report alone names the launch the options set.
  const std::string set_by_options = "launch    the reference launch as the --launch-* and --kv-descending options set it";
  const std::size_t at = all.out.find(set_by_options);
  REQUIRE(at != std::string::npos);
  CHECK(all.out.rfind("\nflash2 — ", at) > all.out.rfind("\nflash1 — ", at));
  CHECK(all.out.find(set_by_options, at + 1) == std::string::npos);
  // --pass both: the backward has no K/V order.
  const Run both = with({"--algo", "flash2", "--pass", "both", "--kv-descending", "--numerics", "off"});
  REQUIRE(both.code == 0);
  CHECK(both.out.starts_with("note: --kv-descending applies to flash2; flash2 backward has no K/V order to reverse\n"));
  // --launch-*: standard's GEMMs are a library's; CSV keeps its rows clean and says it on stderr.
  const Run csv = with({"--algo", "all", "--launch-threads", "64", "--launch-registers", "128", "--csv"});
  REQUIRE(csv.code == 0);
  CHECK(csv.err == "note: --launch-threads applies to flash1 and flash2; standard and flash3 set their own threads "
                   "per CTA\nnote: --launch-registers applies to flash1, flash2 and flash3; standard launches library "
                   "GEMMs, whose launch hbmlab does not set\n");
  // flash3 runs on its own threads beside them: its time is the one without the option.
  const Run flash3_64 = with({"--algo", "flash2,flash3", "--launch-threads", "64", "--csv"});
  const Run flash3_own = with({"--algo", "flash3", "--csv"});
  REQUIRE(flash3_64.code == 0);
  CHECK(flash3_64.err == "note: --launch-threads applies to flash2; flash3 sets its own threads per CTA\n");
  CHECK(flash3_64.out.substr(flash3_64.out.find("\nflash3,") + 1) == flash3_own.out.substr(flash3_own.out.find('\n') + 1));
  CHECK(csv.out.starts_with("algorithm,"));
  const Run launched_text = with({"--algo", "standard,flash1", "--launch-threads", "64"});
  REQUIRE(launched_text.code == 0);
  const std::size_t flash1_at = launched_text.out.find("\nflash1 — ");
  REQUIRE(flash1_at != std::string::npos);
  const std::size_t set_at = launched_text.out.find(set_by_options);
  CHECK(set_at != std::string::npos);
  CHECK(set_at > flash1_at);  // standard runs its library launch
  const Run launched = with({"--algo", "standard,flash1", "--launch-threads", "64", "--json"});
  const Run flash1_64 = with({"--algo", "flash1", "--launch-threads", "64", "--json"});
  const Run standard = with({"--algo", "standard", "--json"});
  REQUIRE(launched.code == 0);
  const auto l = nlohmann::json::parse(launched.out);
  CHECK(l[1] == nlohmann::json::parse(flash1_64.out));
  nlohmann::json l0 = l[0];
  l0.erase("notes");
  CHECK(l0 == nlohmann::json::parse(standard.out));
}

// --hbmlab-kernels changes no room's problem, only the kernel timed: a room with no kernel in gpu/
// (standard's and flash1's backwards) is timed on its reference launch, and the note says so.
TEST_CASE("simulate --hbmlab-kernels on a list: rooms without a kernel in gpu/ are timed on their reference launch", "[cli]") {
  const std::vector<std::string> small = {"simulate", "--seq-len", "256", "--block-rows", "64", "--block-cols", "64",
                                          "--numerics", "off", "--pass", "both"};
  auto with = [&](std::vector<std::string> extra) {
    return run_with(small, extra);
  };
  const std::string note = "--hbmlab-kernels applies to standard, flash2 and flash2 backward; standard backward has no "
                           "CUDA kernel in gpu/ and is timed on its reference launch";
  const Run text = with({"--algo", "standard,flash2", "--hbmlab-kernels"});
  REQUIRE(text.code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.starts_with("note: " + note + "\n\n"));
  const Run json = with({"--algo", "standard,flash2", "--hbmlab-kernels", "--json"});
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.size() == 4);
  check_reference_rooms(
      j, [](const nlohmann::json& room) {
        return room["algorithm"] == "standard" && room.value("pass", "forward") == "backward";
      },
      note, [](const nlohmann::json&) {
        return std::vector<std::string>{"simulate", "--seq-len", "256", "--block-rows", "64", "--block-cols", "64",
                                        "--numerics", "off", "--pass", "backward", "--algo", "standard", "--json"};
      });
  const Run csv = with({"--algo", "standard,flash2", "--hbmlab-kernels", "--csv"});
  REQUIRE(csv.code == 0);
  CHECK(csv.err == "note: " + note + "\n");
  // Every room of both passes runs; the two backwards without a kernel are named once.
  const Run all = with({"--algo", "all", "--hbmlab-kernels", "--csv"});
  REQUIRE(all.code == 0);
  CHECK(all.err == "note: --hbmlab-kernels applies to standard, flash1, flash2, flash2 backward, flash3 and flash3 "
                   "backward; standard backward and flash1 backward have no CUDA kernel in gpu/ and are timed on their "
                   "reference launch\n");
  CHECK(std::count(all.out.begin(), all.out.end(), '\n') == 1 + 8);
}

// `hbmlab measure --blocks default` runs each kernel's first compiled tile for d, whatever the GPU,
// the dtype, N, a causal mask or the decoding layout; gpu/ instantiates its kernels from the same
// table (sim/algo/kernel_tiles.hpp) that simulate reads.
TEST_CASE("simulate --hbmlab-kernels without blocks runs every room's kernel on its own tile shape", "[cli]") {
  // Br × Bc at d = 64 and d = 128, written out: a change to the table shows here.
  const std::map<std::string, std::map<int, Blocks>> kernel = {
      {"standard", {{64, {64, 64}}, {128, {64, 64}}}},
      {"flash1", {{64, {64, 64}}, {128, {64, 64}}}},
      {"flash2", {{64, {128, 128}}, {128, {128, 64}}}},
      {"flash3", {{64, {192, 128}}, {128, {128, 128}}}},
      {"flash2 backward", {{64, {64, 128}}, {128, {64, 128}}}},
      {"flash3 backward", {{64, {64, 128}}, {128, {64, 128}}}},
      {"flash-decoding", {{64, {16, 64}}, {128, {16, 64}}}},
      {"flashdecoding++", {{64, {16, 64}}, {128, {16, 64}}}},
  };
  // The rooms' own table says the same (and so `hbmlab measure --list`, whose rows gpu/ builds from it).
  for (Pass pass : {Pass::forward, Pass::backward})
    for (Algo a : algorithms(pass)) {
      INFO(to_string(a));
      CHECK(a->has_hbmlab_kernel() == kernel.contains(std::string(to_string(a))));
      if (!a->has_hbmlab_kernel()) continue;
      for (int d : {64, 128}) {
        AttentionProblem p;
        p.head_dim = d;
        CHECK(a->hbmlab_kernel_blocks(p) == kernel.at(std::string(to_string(a))).at(d));
      }
    }
  for (const char* gpu : {"a100-40gb", "h100-sxm"})
    for (const char* d : {"64", "128"})
      for (const char* N : {"1024", "4096"})
        for (const std::vector<std::string>& rooms :
             {std::vector<std::string>{"--algo", "all", "--pass", "both"},
              std::vector<std::string>{"--algo", "flash-decoding,flashdecoding++", "--causal"},
              std::vector<std::string>{"--algo", "flash-decoding,flashdecoding++", "--query-len", "1", "--heads", "8", "--kv-heads", "2"}}) {
          INFO(gpu << ", d = " << d << ", N = " << N << ", " << fmt::format("{}", rooms));
          const Run r = run_with({"simulate", "--gpu", gpu, "--hbmlab-kernels", "--head-dim", d, "--seq-len", N,
                                  "--numerics", "off", "--csv"},
                                 rooms);
          REQUIRE(r.code == 0);
          std::istringstream rows(r.out);
          std::string row;
          std::getline(rows, row);  // the header: algorithm,gpu,batch,heads,seq_len,head_dim,dtype,causal,Br,Bc,...
          // One CTA of the A100 (163 KiB) holds neither flash2 backward's 64 × 128 at d = 128 (176.5 KiB) nor
          // any of flash3's: the first compiled shape it holds, and flash3's reference launch (108 × 108).
          const bool a100_128 = std::string(gpu) == "a100-40gb" && std::string(d) == "128";
          std::map<std::string, Blocks> want;
          for (const auto& [room, by_d] : kernel) want[room] = by_d.at(std::stoi(d));
          if (a100_128) {
            want["flash2 backward"] = {64, 64};
            want["flash3"] = {108, 108};
          }
          int rows_checked = 0;
          while (std::getline(rows, row)) {
            std::vector<std::string> cells;
            std::istringstream cols(row);
            for (std::string cell; std::getline(cols, cell, ',');) cells.push_back(cell);
            REQUIRE(cells.size() > 9);
            const auto it = want.find(cells[0]);
            if (it == want.end()) continue;  // standard's and flash1's backwards: no kernel, the paper's rule
            ++rows_checked;
            INFO(row);
            CHECK(Blocks{std::stoll(cells[8]), std::stoll(cells[9])} == it->second);
          }
          CHECK(rows_checked == (rooms[1] == "all" ? 6 : 2));
          CHECK(r.err == (rooms[1] != "all" ? ""
                          : a100_128 ? "note: --hbmlab-kernels applies to standard, flash1, flash2, flash2 backward and "
                                       "flash3 backward; standard backward, flash1 backward and flash3 have no CUDA kernel "
                                       "in gpu/ at d = 128 whose tiles fit the 166912 B one CTA may use (flash3) or at "
                                       "all (standard backward and flash1 backward) and are timed on their reference "
                                       "launch\n"
                                     : "note: --hbmlab-kernels applies to standard, flash1, flash2, flash2 backward, flash3 "
                                       "and flash3 backward; standard backward and flash1 backward have no CUDA kernel in "
                                       "gpu/ and are timed on their reference launch\n"));
        }
  // The report says whose blocks they are, and what the paper's rule would have given.
  const Run text = run({"simulate", "--algo", "flash2", "--hbmlab-kernels", "--numerics", "off"});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("blocks    Br=128 Bc=128 (hbmlab's kernel) → Tr=8 Tc=8"));
  CHECK_THAT(text.out, Catch::Contains("note      the tile shape of flash2's CUDA kernel (`hbmlab measure --blocks "
                                       "default`), not the paper's rule (Br=328, Bc=64)"));
  const Run standard = run({"simulate", "--algo", "standard", "--hbmlab-kernels", "--numerics", "off"});
  REQUIRE(standard.code == 0);
  CHECK_THAT(standard.out, Catch::Contains("blocks    Br=64 Bc=64 (hbmlab's kernel) → Tr=16 Tc=16"));
  CHECK_THAT(standard.out, Catch::Contains("note      the tile shape of standard's CUDA kernel (`hbmlab measure --blocks "
                                           "default`), not the paper's rule (Br=64, Bc=328)"));
  // Where the default does not fit one CTA, the note says so; where no compiled shape does, it is refused.
  const Run backward = run({"simulate", "--algo", "flash2", "--pass", "backward", "--hbmlab-kernels", "--head-dim",
                            "128", "--numerics", "off"});
  REQUIRE(backward.code == 0);
  CHECK_THAT(backward.out, Catch::Contains("blocks    Br=64 Bc=64 (hbmlab's kernel) → Tr=16 Tc=16"));
  CHECK_THAT(backward.out, Catch::Contains("note      the first compiled tile shape of flash2 backward's CUDA kernel "
                                           "that one CTA holds: its default, Br=64 Bc=128 (`hbmlab measure --blocks "
                                           "default`), needs 180736 B, more than 166912 B; not the paper's rule "
                                           "(Br=82, Bc=82)"));
  const Run flash3 = run({"simulate", "--algo", "flash3", "--hbmlab-kernels", "--head-dim", "128"});
  CHECK(flash3.code == 2);
  CHECK(flash3.err == "hbmlab simulate: --hbmlab-kernels: flash3 has no CUDA kernel in gpu/ at d = 128 whose tiles fit "
                      "the 166912 B one CTA may use (their compiled tile shapes are in sim/algo/kernel_tiles.hpp)\n");
  SimulateRequest alone = kernel_request("flash3", 128);
  alone.gpu = load_gpu("a100-40gb");
  CHECK_THROWS_WITH(simulate(alone), "--hbmlab-kernels: no compiled tile shape of flash3's CUDA kernel at d = 128 fits "
                                     "the 166912 B one CTA may use (its default, Br=128 Bc=128, needs 197632 B)");
  // Blocks given are run as given, and a tile set no CTA holds is refused naming the option given.
  const Run given = run({"simulate", "--algo", "standard", "--hbmlab-kernels", "--block-rows", "128", "--block-cols",
                         "128", "--numerics", "off", "--csv"});
  REQUIRE(given.code == 0);
  CHECK_THAT(given.out, Catch::Contains("\nstandard,a100-40gb,1,1,1024,64,fp16,0,128,128,"));
  const Run too_wide = run({"simulate", "--algo", "standard", "--hbmlab-kernels", "--block-cols", "512"});
  CHECK(too_wide.code == 2);
  CHECK(too_wide.out.empty());
  CHECK(too_wide.err.starts_with("hbmlab simulate: --block-cols: scenarios/gpus/a100-40gb.toml: "
                                 "numbers.sram_bytes_per_block: 166912 B cannot hold one tile set of pv_kernel O = PV"));
  // With --sram-bytes, the CTA's SRAM is the option's, and so is the name of what cannot hold the tiles.
  const Run small_cta = run({"simulate", "--algo", "standard", "--hbmlab-kernels", "--block-cols", "512", "--sram-bytes",
                             "200000"});
  CHECK(small_cta.code == 2);
  CHECK(small_cta.err == "hbmlab simulate: --block-cols: --sram-bytes: 200000 B cannot hold one tile set of pv_kernel "
                         "O = PV (280576 B per CTA); smaller blocks (--block-rows, --block-cols) fit\n");
  // flash1's kernel keeps its 83200 B of shared memory only where the run's CTA holds them: at
  // --sram-bytes 65536 its tiles' working set, as the engine times every room, not the A100's 166912 B.
  const Run flash1_small = run({"simulate", "--algo", "flash1", "--hbmlab-kernels", "--sram-bytes", "65536",
                                "--numerics", "off", "--csv"});
  CHECK(flash1_small.err.empty());
  REQUIRE(flash1_small.code == 0);
  CHECK_THAT(flash1_small.out, Catch::Contains("\nflash1,a100-40gb,1,1,1024,64,fp16,0,64,64,"));
  // Without the option, the reference launch on the paper's blocks, as before.
  const Run reference = run({"simulate", "--algo", "standard,flash2", "--numerics", "off", "--csv"});
  CHECK_THAT(reference.out, Catch::Contains("\nstandard,a100-40gb,1,1,1024,64,fp16,0,64,328,"));
  CHECK_THAT(reference.out, Catch::Contains("\nflash2,a100-40gb,1,1,1024,64,fp16,0,328,64,"));
}

// A d no kernel is compiled for: a room of a list whose kernel lacks it is timed on its reference
// launch, as a room without a kernel is; where no room of the list has one, it is refused.
TEST_CASE("simulate --hbmlab-kernels at a d with no compiled kernel is refused, listing the compiled d's", "[cli]") {
  const Run all = run({"simulate", "--algo", "all", "--hbmlab-kernels", "--head-dim", "96", "--numerics", "off"});
  CHECK(all.code == 2);
  CHECK(all.out.empty());
  CHECK(all.err == "hbmlab simulate: --hbmlab-kernels: standard, flash1, flash2 and flash3 have no CUDA kernel in gpu/ "
                   "for d = 96 (hbmlab's kernels are compiled for d = 64 and 128)\n");
  // The same d without the option: the reference launch, on the paper's blocks.
  CHECK(run({"simulate", "--algo", "all", "--head-dim", "96", "--numerics", "off", "--csv"}).code == 0);
  // Called directly, simulate() refuses it the same way.
  CHECK_THROWS_WITH(simulate(kernel_request("flash2", 96)), "--hbmlab-kernels: flash2's CUDA kernel in gpu/ is compiled for d = 64 and "
                                       "128, not d = 96");
}

// What each kernel of gpu/ takes besides its tiles (sim/algo/kernel_tiles.hpp), as `hbmlab measure`
// refuses the rest: fp16 and bf16; NQ = N but for the split-KV kernels; HKV = H but for flash3's and
// theirs; a block mask flash2's and flash3's only. A room of a list whose kernel does not take the
// problem is timed on its reference launch with a note, as a room without a kernel is; alone, or
// where no room of the list can run its kernel, it is refused in one line.
TEST_CASE("simulate --hbmlab-kernels times only the kernels gpu/ has for the problem's dtype and shape", "[cli]") {
  const std::vector<std::string> base = {"simulate", "--seq-len", "1024", "--numerics", "off", "--hbmlab-kernels"};
  const std::string head = "hbmlab simulate: --hbmlab-kernels: ";
  auto refusal = [&](std::vector<std::string> extra, const std::vector<std::string>& on = {}) {
    const Run r = run_with(on.empty() ? base : on, extra);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    return r.err;
  };
  CHECK(refusal({"--algo", "all", "--dtype", "fp32"}) ==
        head + "standard, flash1, flash2 and flash3 have no CUDA kernel in gpu/ for fp32 (hbmlab's kernels are compiled "
               "for fp16 and bf16)\n");
  CHECK(refusal({"--algo", "standard,flash1,flash2,flash3", "--query-len", "1"}) ==
        head + "standard, flash1, flash2 and flash3 have no CUDA kernel in gpu/ for NQ < N (flash-decoding and "
               "flashdecoding++ have one)\n");
  CHECK(refusal({"--algo", "standard,flash1,flash2", "--heads", "8", "--kv-heads", "2"}) ==
        head + "standard, flash1 and flash2 have no CUDA kernel in gpu/ for HKV < H (flash3, flash-decoding and "
               "flashdecoding++ have one)\n");
  CHECK(refusal({"--algo", "flash1", "--block-mask", "butterfly"}) ==
        head + "flash1 has no CUDA kernel in gpu/ for a block mask (flash2 and flash3 have one)\n");
  CHECK(refusal({"--algo", "flash2", "--pass", "backward", "--block-mask", "butterfly"}) ==
        head + "flash2 backward has no CUDA kernel in gpu/ for a block mask (flash2 and flash3 have one)\n");
  // standard's softmax_kernel keeps a row of S, N × 4 B, in one CTA's shared memory: --seq-len bounds it.
  const std::vector<std::string> long_base = {"simulate", "--seq-len", "65536", "--numerics", "off", "--hbmlab-kernels"};
  CHECK(refusal({"--algo", "standard"}, long_base) ==
        head + "standard has no CUDA kernel in gpu/ whose row of S, N × 4 B = 262144 B at --seq-len 65536, fits the "
               "166912 B one CTA may use (flash1, flash2, flash3, flash-decoding and flashdecoding++ have one)\n");
  CHECK(refusal({"--algo", "standard", "--sram-bytes", "4000"}) ==
        head + "standard has no CUDA kernel in gpu/ whose row of S, N × 4 B = 4096 B at --seq-len 1024, fits the "
               "4000 B one CTA may use (sim/algo/kernel_tiles.hpp says what each kernel takes)\n");
  // Rooms that miss for different reasons: each reason with its rooms, and the sentence ends once.
  CHECK(refusal({"--algo", "flash1,flash2", "--block-mask", "butterfly", "--sram-bytes", "16384"}) ==
        head + "flash1 and flash2 have no CUDA kernel in gpu/ for a block mask (flash1) or at d = 64 whose tiles fit "
               "the 16384 B one CTA may use (flash2); sim/algo/kernel_tiles.hpp says what each kernel takes\n");

  // A list where some rooms' kernels take it: those run their kernels, the others their reference launch.
  const Run decode = run_with(base, {"--algo", "all", "--query-len", "1", "--csv"});
  REQUIRE(decode.code == 0);
  CHECK(decode.err == "note: --hbmlab-kernels applies to flash-decoding and flashdecoding++; standard, flash1, flash2 "
                      "and flash3 have no CUDA kernel in gpu/ for NQ < N and are timed on their reference launch\n");
  CHECK(std::count(decode.out.begin(), decode.out.end(), '\n') == 1 + 6);
  const Run masked = run_with(base, {"--algo", "flash1,flash2", "--block-mask", "butterfly"});
  REQUIRE(masked.code == 0);
  CHECK(masked.out.starts_with("note: --hbmlab-kernels applies to flash2; flash1 has no CUDA kernel in gpu/ for a block "
                               "mask and is timed on its reference launch\n"));
  const Run grouped = run_with(base, {"--algo", "all", "--heads", "8", "--kv-heads", "2", "--json"});
  REQUIRE(grouped.code == 0);
  const std::string note = "--hbmlab-kernels applies to flash3, flash-decoding and flashdecoding++; standard, flash1 "
                           "and flash2 have no CUDA kernel in gpu/ for HKV < H and are timed on their reference launch";
  const auto rooms = nlohmann::json::parse(grouped.out);
  REQUIRE(rooms.size() == 6);
  check_reference_rooms(
      rooms, [](const nlohmann::json& room) {
        const std::string name = room["algorithm"];
        return name == "standard" || name == "flash1" || name == "flash2";
      },
      note, [](const nlohmann::json& room) {
        return std::vector<std::string>{"simulate", "--seq-len", "1024", "--numerics", "off", "--heads", "8",
                                        "--kv-heads", "2", "--algo", room["algorithm"].get<std::string>(), "--json"};
      });

  // In a list the row of S leaves standard on its reference launch, in either pass; the rooms with no
  // kernel at all are named apart. (N = 16384 and a CTA of 65000 B: the same limit, in a second.)
  const std::vector<std::string> rows_base = {"simulate", "--seq-len", "16384", "--sram-bytes", "65000", "--numerics",
                                              "off", "--hbmlab-kernels", "--algo", "standard,flash1,flash2"};
  const Run both_rows = run_with(rows_base, {"--pass", "both", "--csv"});
  REQUIRE(both_rows.code == 0);
  CHECK(both_rows.err == "note: --hbmlab-kernels applies to flash1, flash2 and flash2 backward; standard, standard "
                         "backward and flash1 backward have no CUDA kernel in gpu/ whose row of S, N × 4 B = 65536 B at "
                         "--seq-len 16384, fits the 65000 B one CTA may use (standard) or at all (standard backward and "
                         "flash1 backward) and are timed on their reference launch\n");
  CHECK(std::count(both_rows.out.begin(), both_rows.out.end(), '\n') == 1 + 6);
  const Run forward_rows = run_with(rows_base, {"--json"});
  REQUIRE(forward_rows.code == 0);
  check_reference_rooms(
      nlohmann::json::parse(forward_rows.out), [](const nlohmann::json& room) { return room["algorithm"] == "standard"; },
      "--hbmlab-kernels applies to flash1 and flash2; standard has no CUDA kernel in gpu/ whose row of S, N × 4 B = "
      "65536 B at --seq-len 16384, fits the 65000 B one CTA may use and is timed on its reference launch",
      [](const nlohmann::json&) {
        return std::vector<std::string>{"simulate", "--seq-len", "16384", "--sram-bytes", "65000", "--numerics", "off",
                                        "--algo", "standard", "--json"};
      });

  // Called directly, simulate() refuses each the same way.
  SimulateRequest rows = kernel_request("standard", 64);
  rows.problem.seq_len = 65536;
  rows.gpu = load_gpu("a100-40gb");
  CHECK_THROWS_WITH(simulate(rows), "--hbmlab-kernels: standard's CUDA kernel in gpu/ keeps a row of S in shared memory, "
                                    "N × 4 B = 262144 B at --seq-len 65536, more than the 166912 B one CTA may use");
  SimulateRequest fp32 = kernel_request("flash2", 64);
  fp32.problem.dtype = Dtype::fp32;
  CHECK_THROWS_WITH(simulate(fp32), "--hbmlab-kernels: flash2's CUDA kernel in gpu/ is compiled for fp16 and bf16, not fp32");
  SimulateRequest decoding = kernel_request("flash2", 64);
  decoding.problem.query_len = 1;
  CHECK_THROWS_WITH(simulate(decoding), "--hbmlab-kernels: flash2's CUDA kernel in gpu/ takes NQ = N only, not NQ = 1 of N = 1024");
  SimulateRequest gqa = kernel_request("standard", 64);
  gqa.problem.heads = 8;
  gqa.problem.kv_heads = 2;
  CHECK_THROWS_WITH(simulate(gqa), "--hbmlab-kernels: standard's CUDA kernel in gpu/ takes HKV = H only, not HKV = 2 of H = 8");
  SimulateRequest mask = kernel_request("flash1", 64);
  mask.problem.block_mask = parse_block_mask("butterfly");
  CHECK_THROWS_WITH(simulate(mask), "--hbmlab-kernels: flash1's CUDA kernel in gpu/ takes no block mask");
  // Those that take it run it.
  gqa.gpu = decoding.gpu = load_gpu("a100-40gb");
  gqa.algo = algo_named("flash3");
  CHECK(simulate(gqa).launch.hbmlab_kernels);
  decoding.algo = algo_named("flash-decoding");
  CHECK(simulate(decoding).launch.hbmlab_kernels);
}

TEST_CASE("bounds takes --causal and --csv as simulate and sweep do", "[cli][bounds]") {
  const std::vector<std::string> small = {"bounds", "--seq-lens", "256,512", "--head-dims", "16,32", "--sram-elements",
                                          "1024,2048", "--seq-len", "512", "--head-dim", "32", "--sram-element-count", "2048"};
  auto json = [&](std::vector<std::string> extra) {
    extra.push_back("--json");
    const Run r = run_with(small, extra);
    REQUIRE(r.code < 2);
    return nlohmann::json::parse(r.out);
  };
  // The N sweep's first point: flash2 skips the pairs above the diagonal, standard's S and P stay N × N.
  auto first = [](const nlohmann::json& j, const std::string& room) {
    for (const auto& row : j["rows"])
      if (row["algorithm"] == room && row["sweep"] == "N") return row["points"][0]["accesses"].get<std::int64_t>();
    return std::int64_t{-1};
  };
  const auto dense = json({"--algo", "standard,flash2"}), causal = json({"--algo", "standard,flash2", "--causal"});
  CHECK(dense["causal"] == false);
  CHECK(causal["causal"] == true);
  CHECK(first(causal, "standard") == first(dense, "standard"));
  CHECK(first(causal, "flash2") < first(dense, "flash2"));
  CHECK(first(causal, "flash2") > 0);
  // CSV: one row per point, the notes beside it on stderr.
  const Run csv = run_with(small, {"--algo", "standard,flash1", "--densities", "0.5,1", "--csv"});
  REQUIRE(csv.code == 1);  // these few small points fit some exponents loosely: the verdict fails
  CHECK(csv.err == "note: --densities applies to flash1; standard does not take a block mask\n");
  CHECK(csv.out.starts_with("algorithm,pass,sweep,fitted_exponent,expected_exponent,exponent_ok,exact_ok,bound,ratio_min,"
                            "ratio_max,N,d,M,s,Br,Bc,accesses,closed_form_accesses,bound_value,ratio\n"
                            "standard,forward,N,1.91754,2,0,1,\"N d + N^2\",4,4,256,32,2048,1,16,16,294912,294912,73728,4\n"));
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 1 + 3 * 2 + 4 * 2);  // standard N, d, M; flash1 and s
  // The CSV flattens the JSON: its columns are a row's fields and then a point's, one line per point.
  const Run same_json = run_with(small, {"--algo", "standard,flash1", "--densities", "0.5,1", "--pass", "both", "--json"});
  const auto same = nlohmann::ordered_json::parse(same_json.out);  // in the order written
  const Run same_csv = run_with(small, {"--algo", "standard,flash1", "--densities", "0.5,1", "--pass", "both", "--csv"});
  std::string header;
  std::size_t points = 0;
  for (const auto& row : same["rows"]) {
    if (header.empty()) {
      for (const auto& [key, v] : row.items())
        if (key != "points") header += key + ",";
      for (const auto& [key, v] : row["points"][0].items()) header += key + ",";
      header.back() = '\n';
    }
    points += row["points"].size();
  }
  CHECK(same_csv.out.starts_with(header));
  CHECK(std::count(same_csv.out.begin(), same_csv.out.end(), '\n') == static_cast<std::ptrdiff_t>(1 + points));
  CHECK(same_csv.out.find("\nflash1,backward,") != std::string::npos);
  const Run both = run_with(small, {"--json", "--csv"});
  CHECK(both.code == 2);
  CHECK(both.err == "hbmlab bounds: --csv: choose one of --json and --csv\n");
}

TEST_CASE("a shape some rooms of the list do not take: those rooms are left out, a note names them", "[cli]") {
  const std::vector<std::string> toy = {"simulate", "--gpu", "toy", "--seq-len", "16", "--head-dim", "4"};
  auto with = [&](std::vector<std::string> extra) {
    return run_with(toy, extra);
  };
  auto rooms_in = [](const std::string& text) {  // the rooms a text report heads, in order
    std::string out;
    for (const char* room : {"standard", "flash1", "flash2", "flash3", "flash-decoding", "flashdecoding++"}) {
      const std::string head = fmt::format("{} — ", room);
      if (!text.starts_with(head) && text.find('\n' + head) == std::string::npos) continue;
      if (!out.empty()) out += ' ';
      out += room;
    }
    return out;
  };
  // --block-mask: standard has no blocks to skip; an unmasked standard beside masked rooms would mislead.
  const std::string mask_note = "--block-mask applies to flash1, flash2 and flash3; standard does not take a block mask "
                                "and is left out";
  const Run text = with({"--algo", "all", "--block-mask", "butterfly"});
  REQUIRE(text.code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.starts_with("note: " + mask_note + "\n\n"));
  CHECK(rooms_in(text.out) == "flash1 flash2 flash3");
  // JSON: the left-out room has no object, so each room run carries the note; its figures are its own.
  const Run json = with({"--algo", "all", "--block-mask", "butterfly", "--json"});
  const Run alone = with({"--algo", "flash2", "--block-mask", "butterfly", "--json"});
  REQUIRE(json.code == 0);
  REQUIRE(alone.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  REQUIRE(j.size() == 3);
  for (const auto& room : j) CHECK(room["notes"] == nlohmann::json::array({mask_note}));
  CHECK(j[1]["algorithm"] == "flash2");
  nlohmann::json j1 = j[1];
  j1.erase("notes");
  CHECK(j1 == nlohmann::json::parse(alone.out));
  // CSV: rows of the rooms run only, the note on stderr.
  const Run csv = with({"--algo", "standard,flash1", "--block-mask", "butterfly", "--counts-only", "--csv"});
  REQUIRE(csv.code == 0);
  CHECK(csv.err == "note: --block-mask applies to flash1; standard does not take a block mask and is left out\n");
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 2);
  CHECK(csv.out.find("\nflash1,") != std::string::npos);
  // --splits and --unified-max: `all` and lists leave out the rooms that do not take them, with the note.
  const Run splits = with({"--algo", "all", "--query-len", "1", "--splits", "2", "--counts-only"});
  REQUIRE(splits.code == 0);
  CHECK(splits.out.starts_with("note: --splits applies to flash-decoding and flashdecoding++; standard, flash1, flash2 "
                               "and flash3 do not split the K/V cache and are left out\n"));
  CHECK(rooms_in(splits.out) == "flash-decoding flashdecoding++");
  const Run listed = with({"--algo", "flash1,flash-decoding", "--query-len", "1", "--splits", "2", "--counts-only"});
  REQUIRE(listed.code == 0);
  CHECK(listed.out.starts_with(
      "note: --splits applies to flash-decoding; flash1 does not split the K/V cache and is left out\n"));
  CHECK(rooms_in(listed.out) == "flash-decoding");
  const Run unified = with({"--algo", "all", "--query-len", "1", "--unified-max", "3", "--counts-only"});
  REQUIRE(unified.code == 0);
  CHECK(unified.out.starts_with("note: --unified-max applies to flashdecoding++; standard, flash1, flash2, flash3 and "
                                "flash-decoding do not take a unified max and are left out\n"));
  CHECK(rooms_in(unified.out) == "flashdecoding++");
  // Refused, one line, when no room of the list takes it.
  const Run none = with({"--algo", "standard,flash-decoding", "--query-len", "1", "--block-mask", "butterfly"});
  CHECK(none.code == 2);
  CHECK(none.out.empty());
  CHECK(none.err == "hbmlab simulate: --block-mask: standard and flash-decoding do not take a block mask (flash1, flash2 "
                    "and flash3 do)\n");
}

TEST_CASE("what a command does not take is named in the order it was given", "[cli][errors]") {
  // CLI11 lists such arguments last first ("x --gpu"); hbmlab names them as they were typed.
  CHECK(run({"presets", "--seq-len", "x"}).err ==
        "hbmlab presets: --seq-len x: not expected (hbmlab presets --help lists what it takes)\n");
  CHECK(run({"simulate", "--bogus"}).err == "hbmlab simulate: --bogus: not expected (hbmlab simulate --help lists what it takes)\n");
  CHECK(run({"frobnicate"}).err == "hbmlab: frobnicate: not expected (hbmlab --help lists what it takes)\n");
  CHECK(run({"presets", "--seq-len", "x"}).code == 2);
}

TEST_CASE("--help exits 0", "[cli]") {
  const Run r = run({"simulate", "--help"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("--seq-len"));
}

TEST_CASE("gui --lesson N --stage S opens that lesson's stage; bad ones are CLI errors", "[cli]") {
  GuiOptions opened;
  Frontends frontends;
  frontends.gui = [&opened](const GuiOptions& o) {
    opened = o;
    return 0;
  };
  auto gui = [&frontends](std::vector<std::string> args) {
    std::ostringstream out, err;
    args.insert(args.begin(), "gui");
    const int code = run_cli(args, out, err, frontends);
    return Run{code, out.str(), err.str()};
  };
  REQUIRE(gui({"--lesson", "3", "--stage", "2"}).code == 0);
  CHECK(opened.scenario == "lessons/03-block-size-against-sram");
  CHECK(opened.stage == 2);
  REQUIRE(gui({"--lesson", "8"}).code == 0);
  CHECK_THAT(opened.scenario, Catch::StartsWith("lessons/08-"));
  CHECK(opened.stage == 0);
  // A screenshot without --frames still ends: it is saved after a few frames, not when the window closes.
  REQUIRE(gui({"--lesson", "8", "--screenshot", "x.png"}).code == 0);
  CHECK(opened.frames > 0);
  REQUIRE(gui({"--lesson", "8", "--screenshot", "x.png", "--frames", "30"}).code == 0);
  CHECK(opened.frames == 30);
  REQUIRE(gui({"--lesson", "8"}).code == 0);
  CHECK(opened.frames == 0);  // an interactive window runs until closed
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--lesson", "9"}, "--lesson"},
      {{"--lesson", "0"}, "--lesson"},
      {{"--lesson", "2", "--scenario", "gpt2-medium"}, "--lesson"},
      {{"--lesson", "1", "--stage", "6"}, "--stage"},
      {{"--stage", "0"}, "--stage"},
      {{"--scenario", "gpt2-medium", "--stage", "1"}, "--stage"},
      {{"--ui-scale", "0.1"}, "--ui-scale"},
      {{"--ui-scale", "9"}, "--ui-scale"},
      {{"--height", "100"}, "--height"},
      {{"--width", "100"}, "--width"},
  };
  for (const auto& [args, option] : bad) {
    INFO(args[0] << " " << args[1]);
    const Run r = gui(args);
    CHECK(r.code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains(option));
  }
}

TEST_CASE("measure without CUDA says how to get it", "[cli]") {
  const Run r = run({"measure"});
  CHECK(r.code == 2);
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains("CUDA"));
}

TEST_CASE("sweep prints CSV with fitting and non-fitting blocks", "[cli][sweep]") {
  const Run r = run({"sweep", "--gpu", "toy", "--seq-len", "32", "--head-dim", "4", "--block-rows", "4,8", "--block-cols", "4,8,16"});
  REQUIRE(r.code == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1 + 6);
  CHECK_THAT(r.out, Catch::StartsWith("algorithm,sram_bytes,M_elements,Br,Bc"));
  CHECK_THAT(r.out, Catch::Contains(",1,") && Catch::Contains(",0,"));  // fits and does not fit
}

TEST_CASE("sweep gives a CTA what the GPU lets one CTA use, as simulate does", "[cli][sweep]") {
  // flash2 at d = 128, 196 x 256: 232,992 B of tiles, more than an H100 CTA's 227 KiB (232,448 B) and
  // less than the SM's 228 KiB (233,472 B).
  std::vector<std::string> args = {"sweep", "--gpu", "h100-sxm", "--algo", "flash2", "--seq-len", "4096",
                                   "--head-dim", "128", "--block-rows", "196", "--block-cols", "256", "--json"};
  const Run gpu_own = run(args);
  REQUIRE(gpu_own.code == 0);
  const auto point = nlohmann::json::parse(gpu_own.out)["points"][0];
  CHECK(point["working_set_bytes"] == 232992);
  CHECK(point["sram_bytes"] == 233472);
  CHECK(point["cta_sram_bytes"] == 232448);
  CHECK(point["fits"] == false);
  CHECK(point["predicted_s"].is_null());
  // simulate refuses the same blocks for the same reason.
  const Run refused = run({"simulate", "--gpu", "h100-sxm", "--algo", "flash2", "--seq-len", "4096", "--head-dim", "128",
                           "--block-rows", "196", "--block-cols", "256"});
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains("need 232992 B of SRAM, more than the 232448 B one CTA may use"));
  // An SRAM given is the SM's and its CTA's, so the whole 228 KiB holds them.
  std::vector<std::string> given = args;
  given.insert(given.end(), {"--sram-bytes", "233472"});
  const Run whole = run(given);
  REQUIRE(whole.code == 0);
  const auto fitted = nlohmann::json::parse(whole.out)["points"][0];
  CHECK(fitted["cta_sram_bytes"] == 233472);
  CHECK(fitted["fits"] == true);
  CHECK(fitted["predicted_s"].get<double>() > 0);
  // The CSV keeps its columns where they were and adds the CTA's SRAM last.
  args.pop_back();
  const Run csv = run(args);
  REQUIRE(csv.code == 0);
  CHECK_THAT(csv.out, Catch::StartsWith("algorithm,sram_bytes,M_elements,Br,Bc,Tr,Tc,working_set_bytes,fits,hbm_read_bytes,"
                                        "hbm_write_bytes,accesses,bound_ratio,predicted_s,cta_sram_bytes\n"));
  CHECK_THAT(csv.out, Catch::Contains(",232992,0,") && Catch::EndsWith(",232448\n"));
}

TEST_CASE("an SRAM a scenario sets is named at its line when it cannot hold the problem", "[cli][errors]") {
  const std::string path = (std::filesystem::temp_directory_path() / "hbmlab-scenario-sram.toml").string();
  std::ofstream(path) << "[workload]\ntitle = \"t\"\nsram_bytes = 1000\nalgorithms = [\"flash2\"]\n"
                         "[problem]\nseq_len = 256\nhead_dim = 256\n";
  const Run r = run({"simulate", "--scenario", path});
  CHECK(r.code == 2);
  CHECK(r.err == "hbmlab simulate: " + path +
                     ":3: workload.sram_bytes: 1000 B per CTA cannot hold even one row each of Q, K, V and O (d = 256)\n");
  CHECK(r.out.empty());
  // --sram-bytes given over the scenario's is named as the option.
  const Run option = run({"simulate", "--scenario", path, "--sram-bytes", "1500"});
  CHECK(option.code == 2);
  CHECK_THAT(option.err, Catch::StartsWith("hbmlab simulate: --sram-bytes: 1500 B per CTA cannot hold"));
  std::filesystem::remove(path);
}

TEST_CASE("presets list every number with its source", "[cli][spec]") {
  const Run r = run({"presets", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.size() == 5);
  for (const auto& gpu : j)
    for (const auto& [key, number] : gpu["numbers"].items()) {
      INFO(gpu["name"] << " " << key);
      CHECK_FALSE(number["source"].get<std::string>().empty());
      CHECK_FALSE(number["unit"].get<std::string>().empty());
    }
}

TEST_CASE("presets --gpu shows one preset, by name or from a file, and names an unknown one", "[cli][spec]") {
  const Run all = run({"presets"});
  const Run one = run({"presets", "--gpu", "h200"});
  REQUIRE(one.code == 0);
  CHECK(one.out.starts_with("h200 — "));
  CHECK(one.out.find("\nh100-sxm — ") == std::string::npos);
  CHECK(all.out.find("\nh200 — ") != std::string::npos);
  CHECK(one.out.size() < all.out.size() / 3);  // one of the five
  const Run file = run({"presets", "--gpu", std::string(HBMLAB_SOURCE_DIR) + "/scenarios/gpus/h200.toml", "--json"});
  REQUIRE(file.code == 0);
  const auto j = nlohmann::json::parse(file.out);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["numbers"]["sm_count"]["value"] == 132);
  const Run unknown = run({"presets", "--gpu", "h300"});
  CHECK(unknown.code == 2);
  CHECK(unknown.out.empty());
  CHECK(unknown.err.starts_with("hbmlab presets: --gpu: unknown preset 'h300' (known: a100-40gb, "));
}

TEST_CASE("validate counts within the cut-offs it is given and prints them", "[cli][validate]") {
  const std::string file = std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/h100-decode-sdpa-ncu.json";
  // PyTorch's 27 decode steps: DRAM reads all within 5 % (the combine reads the partials from DRAM,
  // as ncu's emptied L2 made it); time all 27 within 20 % (HBM's latency under load).
  const Run defaults = run({"validate", "--measurements", file});
  REQUIRE(defaults.code == 0);
  CHECK_THAT(defaults.out, Catch::Contains("27 of 27 within 10%"));
  CHECK_THAT(defaults.out, Catch::Contains("of 27 within 15%"));
  const Run tight = run({"validate", "--measurements", file, "--dram-within", "5", "--time-within", "20"});
  REQUIRE(tight.code == 0);
  CHECK_THAT(tight.out, Catch::Contains("27 of 27 within 5%"));
  CHECK_THAT(tight.out, Catch::Contains("27 of 27 within 20%"));
  const Run json = run({"validate", "--measurements", file, "--dram-within", "2.5", "--json"});
  REQUIRE(json.code == 0);
  CHECK(nlohmann::json::parse(json.out)["summary"]["dram_read"]["tolerance"] == Approx(0.025));
  for (const char* bad : {"0", "-5", "2000"}) {
    const Run r = run({"validate", "--measurements", file, "--dram-within", bad});
    CHECK(r.code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains("--dram-within"));
  }
}

// simulate times the room's reference launch unless --hbmlab-kernels asks for hbmlab's own kernels, and
// says which; with it, simulate's time of a decode record's launch is validate's, less the CUDA events'
// cost validate adds (assets/measurements/h100-decode-b1.json: S = 17 at 128K, lesson 5's grid).
TEST_CASE("simulate says which launch it times; with --hbmlab-kernels it is validate's", "[cli][validate][decode]") {
  const std::string file = std::string(HBMLAB_SOURCE_DIR) + "/assets/measurements/h100-decode-b1.json";
  const std::vector<std::string> args = {"simulate", "--gpu", "h100-sxm", "--algo", "flash-decoding", "--heads", "32",
                                         "--kv-heads", "8", "--query-len", "1", "--head-dim", "128", "--block-rows",
                                         "16", "--block-cols", "64", "--seq-len", "131072", "--splits", "17",
                                         "--numerics", "off"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    const Run r = run(a);
    REQUIRE(r.code == 0);
    return r.out;
  };
  CHECK_THAT(with({}), Catch::Contains("\n  launch    the reference launch ("));
  CHECK_THAT(with({"--hbmlab-kernels"}), Catch::Contains("\n  launch    hbmlab's CUDA kernels in gpu/"));
  CHECK_THAT(with({"--launch-threads", "256"}), Catch::Contains("\n  launch    the reference launch as the --launch-*"));
  // flash-decoding visits its K/V blocks in one order: --kv-descending is refused, not ignored.
  std::vector<std::string> descending = args;
  descending.push_back("--kv-descending");
  CHECK(run(descending).err == "hbmlab simulate: --kv-descending: flash-decoding has no K/V order to reverse (flash2 has one)\n");
  const auto reference = nlohmann::json::parse(with({"--json"}));
  const auto ours = nlohmann::json::parse(with({"--hbmlab-kernels", "--json"}));
  CHECK(reference["time"]["launch"] == "reference");
  CHECK(ours["time"]["launch"] == "hbmlab-kernels");

  const Run v = run({"validate", "--measurements", file, "--json"});
  REQUIRE(v.code == 0);
  const auto rows = nlohmann::json::parse(v.out)["rows"];
  const auto row = std::find_if(rows.begin(), rows.end(), [](const nlohmann::json& r) {
    return r["algorithm"] == "flash-decoding" && r["problem"]["seq_len"] == 131072 && r["problem"]["query_len"] == 1;
  });
  REQUIRE(row != rows.end());
  REQUIRE((*row)["problem"]["splits"] == 17);
  const GpuSpec gpu = load_gpu("h100-sxm");
  REQUIRE(ours["time"]["kernels"].size() == 2);  // the split kernel and the combine: one gap between them
  const double events_s = (gpu.event_timing_overhead_ns + gpu.kernel_gap_ns) * 1e-9;
  CHECK((*row)["predicted"]["time_s"].get<double>() ==
        Approx(ours["time"]["predicted_s"].get<double>() + events_s).epsilon(1e-9));
}

// The decimal numbers of --densities and --block-mask random:DENSITY, read the same way on every
// platform (the page's libc++ has no std::from_chars for double).
TEST_CASE("parse_decimal takes what from_chars takes and nothing else", "[cli]") {
  CHECK(parse_decimal("0.25") == 0.25);
  CHECK(parse_decimal("1") == 1.0);
  CHECK(parse_decimal("1e-3") == 1e-3);
  CHECK(parse_decimal("-2.5") == -2.5);
  for (const char* bad : {"", " 1", "1 ", "+1", "0x10", "1.5x", "abc", "0.5,"}) {
    INFO(bad);
    CHECK_FALSE(parse_decimal(bad).has_value());
  }
  const Run r = run({"bounds", "--densities", "0.5,abc"});
  CHECK(r.code == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("--densities: 'abc'") != std::string::npos);
}

TEST_CASE("an empty item of a list and SRAM past what the model takes are refused naming the option",
          "[cli][errors]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"simulate", "--algo", "flash2,"}, "--algo: 'flash2,' has an empty item"},
      {{"simulate", "--algo", ",flash2"}, "--algo: ',flash2' has an empty item"},
      {{"simulate", "--algo", "flash1,,flash2"}, "--algo: 'flash1,,flash2' has an empty item"},
      {{"sweep", "--block-rows", "64,"}, "--block-rows: '64,' has an empty item"},
      {{"bounds", "--densities", "0.5,1,"}, "--densities: '0.5,1,' has an empty item"},
      {{"simulate", "--sram-bytes", "99999999999"}, "--sram-bytes: 99999999999 is outside 1 to 1073741824 bytes"},
      {{"sweep", "--sram-bytes", "65536,99999999999"}, "--sram-bytes: 99999999999 is outside 1 to 1073741824 bytes"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args[0] << " " << args[1] << " " << args[2]);
    const Run r = run(args);
    CHECK(r.code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(r.out.empty());
  }
  // The largest SRAM the model takes still runs.
  CHECK(run({"simulate", "--seq-len", "256", "--head-dim", "64", "--sram-bytes", "1073741824", "--numerics", "off"}).code == 0);
}

TEST_CASE("a workload without N or d, or with SRAM past the model, is refused at its line", "[cli][errors]") {
  const std::string path = (std::filesystem::temp_directory_path() / "hbmlab-workload-keys.toml").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[workload]\ntitle = \"t\"\n[problem]\nseq_len = 256\n",
       ":3: problem.head_dim: missing (the head dimension d, such as 64 or 128)\n"},
      {"[workload]\ntitle = \"t\"\n[problem]\nhead_dim = 64\n",
       ":3: problem.seq_len: missing (the sequence length N, such as 1024)\n"},
      {"[workload]\ntitle = \"t\"\nsram_bytes = 99999999999\n[problem]\nseq_len = 256\nhead_dim = 64\n",
       ":3: workload.sram_bytes: 99999999999 is outside 1 to 1073741824 bytes (1 GiB; a GPU has a few hundred KiB of "
       "SRAM per SM)\n"},
  };
  for (const auto& [text, expected] : cases) {
    std::ofstream(path) << text;
    const Run r = run({"simulate", "--scenario", path});
    CHECK(r.code == 2);
    CHECK(r.err == "hbmlab simulate: " + path + expected);
    CHECK(r.out.empty());
  }
  std::filesystem::remove(path);
}

TEST_CASE("validate refuses a record whose measured time is not above 0 or whose bytes are negative",
          "[cli][validate][errors]") {
  const std::string path = (std::filesystem::temp_directory_path() / "hbmlab-bad-figures.json").string();
  const std::string record = R"({"device": {"name": "NVIDIA H100 80GB HBM3"}, "records": [{"kernel": "flash2",
      "problem": {"batch": 1, "heads": 1, "seq_len": 256, "head_dim": 64}, "blocks": {"Br": 64, "Bc": 64},
      "time_ms_median": TIME, "dram_read_bytes": BYTES}]})";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"-1", "1", "records[0].time_ms_median: must be a time above 0 ms, got -1"},
      {"0", "1", "records[0].time_ms_median: must be a time above 0 ms, got 0"},
      {"\"NaN\"", "1", "records[0].time_ms_median: expected a number, got string"},
      {"0.5", "-4096", "records[0].dram_read_bytes: must be a number of bytes ≥ 0, got -4096"},
  };
  for (const auto& [time, bytes, expected] : cases) {
    std::string text = record;
    text.replace(text.find("TIME"), 4, time);
    text.replace(text.find("BYTES"), 5, bytes);
    std::ofstream(path) << text;
    const Run r = run({"validate", "--measurements", path});
    CHECK(r.code == 2);
    CHECK(r.err == "hbmlab validate: " + path + ": " + expected + "\n");
    CHECK(r.out.empty());
  }
  std::filesystem::remove(path);
}

TEST_CASE("sweep's CSV leaves a figure empty where its JSON writes null", "[cli][sweep]") {
  const std::vector<std::string> args = {"sweep", "--gpu", "toy", "--seq-len", "32", "--head-dim", "4",
                                         "--block-rows", "4,8", "--block-cols", "4,8,16", "--algo", "flash1"};
  const Run csv = run(args);
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const Run json = run(json_args);
  REQUIRE(csv.code == 0);
  REQUIRE(json.code == 0);
  CHECK_THAT(csv.out, !Catch::Contains("nan"));
  const auto points = nlohmann::json::parse(json.out)["points"];
  std::istringstream lines(csv.out);
  std::string line;
  std::getline(lines, line);  // the header
  std::size_t k = 0, nulls = 0;
  for (; std::getline(lines, line); ++k) {
    REQUIRE(k < points.size());
    std::vector<std::string> fields;
    std::stringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    if (line.back() == ',') fields.push_back("");
    REQUIRE(fields.size() == 15);
    for (const auto& [column, key] : {std::pair{12, "bound_ratio"}, std::pair{13, "predicted_s"}}) {
      INFO(line << " " << key);
      CHECK(fields[column].empty() == points[k][key].is_null());
      nulls += points[k][key].is_null();
    }
  }
  CHECK(k == points.size());
  CHECK(nulls > 0);  // blocks that do not fit have no time
}

TEST_CASE("validate's table is as wide on every line when a mask label is longer than its column", "[cli][validate]") {
  const std::string path = (std::filesystem::temp_directory_path() / "hbmlab-long-mask.json").string();
  auto record = [](const char* mask) {
    return fmt::format(R"({{"kernel": "flash2", "problem": {{"batch": 1, "heads": 2, "seq_len": 2048, "head_dim": 64{}}},
      "blocks": {{"Br": 64, "Bc": 64}}, "time_ms_median": 0.05, "dram_read_bytes": 1000000}})",
                       mask);
  };
  std::ofstream(path) << fmt::format(R"({{"device": {{"name": "NVIDIA H100 80GB HBM3"}}, "records": [{}, {}]}})",
                                     record(""), record(R"(, "block_mask": "local:1024")"));
  const Run r = run({"validate", "--measurements", path});
  REQUIRE(r.code == 0);
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);  // the title
  std::vector<std::size_t> widths;
  auto columns = [](const std::string& s) {
    return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  while (std::getline(lines, line) && line.rfind("  (", 0) != 0) widths.push_back(columns(line));
  REQUIRE(widths.size() == 3);  // the header and two records
  CHECK_THAT(r.out, Catch::Contains("full+local:1024"));
  CHECK(widths[1] == widths[0]);
  CHECK(widths[2] == widths[0]);
  std::filesystem::remove(path);
}

TEST_CASE("sweep and bounds take an option some rooms of the list take as simulate does", "[cli][sweep]") {
  const std::vector<std::string> toy = {"sweep", "--gpu", "toy", "--seq-len", "32", "--head-dim", "4",
                                        "--block-rows", "4,8", "--block-cols", "4,8"};
  auto sweep = [&](std::vector<std::string> extra) {
    return run_with(toy, extra);
  };
  auto rooms_of = [](const nlohmann::json& points) {  // the rooms of a sweep's points, in order, each once
    std::vector<std::string> rooms;
    for (const auto& pt : points)
      if (rooms.empty() || rooms.back() != pt["algorithm"]) rooms.push_back(pt["algorithm"]);
    return rooms;
  };
  // --block-mask leaves standard out; flash2's points are those of flash2 swept alone.
  const std::string mask_note = "--block-mask applies to flash1, flash2 and flash3; standard does not take a block mask "
                                "and is left out";
  const Run all = sweep({"--algo", "all", "--block-mask", "butterfly", "--json"});
  const Run alone = sweep({"--algo", "flash2", "--block-mask", "butterfly", "--json"});
  REQUIRE(all.code == 0);
  REQUIRE(alone.code == 0);
  CHECK(all.err.empty());
  const auto j = nlohmann::json::parse(all.out), a = nlohmann::json::parse(alone.out);
  CHECK(j["notes"] == nlohmann::json::array({mask_note}));
  CHECK_FALSE(a.contains("notes"));
  CHECK(rooms_of(j["points"]) == std::vector<std::string>{"flash1", "flash2", "flash3"});
  nlohmann::json flash2 = nlohmann::json::array();
  for (const auto& pt : j["points"])
    if (pt["algorithm"] == "flash2") flash2.push_back(pt);
  REQUIRE(flash2.size() == 4);
  CHECK(flash2 == a["points"]);
  CHECK(j["problem"] == a["problem"]);
  // CSV: the rows of the rooms swept, the note on stderr.
  const Run csv = sweep({"--algo", "standard,flash1", "--block-mask", "butterfly"});
  REQUIRE(csv.code == 0);
  CHECK(csv.err == "note: --block-mask applies to flash1; standard does not take a block mask and is left out\n");
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 1 + 4);
  CHECK(csv.out.find("\nstandard,") == std::string::npos);
  // --splits: `all` on a decoding problem sweeps the split-KV rooms, and says so.
  const Run splits = sweep({"--algo", "all", "--query-len", "1", "--splits", "2", "--json"});
  REQUIRE(splits.code == 0);
  const auto s = nlohmann::json::parse(splits.out);
  CHECK(s["notes"] == nlohmann::json::array({"--splits applies to flash-decoding and flashdecoding++; standard, flash1, "
                                             "flash2 and flash3 do not split the K/V cache and are left out"}));
  CHECK(rooms_of(s["points"]) == std::vector<std::string>{"flash-decoding", "flashdecoding++"});
  // --kv-descending and --no-l2 reach the timing engine as simulate's do (causal at N = 1024, where
  // both change flash2's time); flash2 alone has a K/V order.
  const std::vector<std::string> causal = {"sweep", "--seq-len", "1024", "--causal", "--block-rows", "64",
                                           "--block-cols", "64,128", "--algo", "all", "--json"};
  auto with = [&](const std::vector<std::string>& args, std::vector<std::string> extra) {
    extra.insert(extra.begin(), args.begin(), args.end());
    const Run r = run(extra);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  const auto plain_sweep = with(causal, {});
  for (const char* option : {"--kv-descending", "--no-l2"}) {
    const auto d = with(causal, {option});
    if (option == std::string("--kv-descending"))
      CHECK(d["notes"] == nlohmann::json::array(
                              {"--kv-descending applies to flash2; standard, flash1 and flash3 have no K/V order to reverse"}));
    else
      CHECK_FALSE(d.contains("notes"));
    REQUIRE(d["points"].size() == 8);
    for (std::size_t k = 0; k < d["points"].size(); ++k) {
      const auto& pt = d["points"][k];
      INFO(option << " " << pt.dump());
      const std::string room = pt["algorithm"];
      if (!pt["fits"]) continue;
      const bool differs = pt["predicted_s"] != plain_sweep["points"][k]["predicted_s"];
      if (room == "flash2") CHECK(differs);                                  // the option reached the engine
      else if (option == std::string("--kv-descending")) CHECK_FALSE(differs);  // the others run as they are
      std::vector<std::string> args = {"simulate", "--seq-len", "1024", "--causal", "--algo", room, "--block-rows",
                                       std::to_string(pt["Br"].get<int>()), "--block-cols",
                                       std::to_string(pt["Bc"].get<int>()), "--numerics", "off"};
      if (room == "flash2" || option == std::string("--no-l2")) args.push_back(option);
      CHECK(pt["predicted_s"] == with(args, {"--json"})["time"]["predicted_s"]);
    }
  }
  // --launch-*, as simulate takes them: standard's GEMMs are a library's, so it is swept as it is.
  const auto launched = with(causal, {"--launch-threads", "64"});
  CHECK(launched["notes"] == nlohmann::json::array({"--launch-threads applies to flash1 and flash2; standard and "
                                                    "flash3 set their own threads per CTA"}));
  REQUIRE(launched["points"].size() == 8);
  for (std::size_t k = 0; k < launched["points"].size(); ++k) {
    const auto& pt = launched["points"][k];
    INFO(pt.dump());
    const std::string room = pt["algorithm"];
    if (!pt["fits"]) continue;
    const bool differs = pt["predicted_s"] != plain_sweep["points"][k]["predicted_s"];
    if (room == "standard" || room == "flash3") CHECK_FALSE(differs);
    if (room == "flash1") CHECK(differs);  // 64 threads instead of its 256
    std::vector<std::string> args = {"simulate", "--seq-len", "1024", "--causal", "--algo", room, "--block-rows",
                                     std::to_string(pt["Br"].get<int>()), "--block-cols",
                                     std::to_string(pt["Bc"].get<int>()), "--numerics", "off", "--json"};
    if (room == "flash1" || room == "flash2") args.insert(args.end(), {"--launch-threads", "64"});
    CHECK(pt["predicted_s"] == with(args, {})["time"]["predicted_s"]);
  }
  // bounds --densities: the rooms without a block mask sweep N, d and M as they would, and the note says so.
  const std::vector<std::string> small = {"bounds", "--seq-lens", "256,512", "--head-dims", "16,32", "--sram-elements",
                                          "1024,2048", "--seq-len", "512", "--head-dim", "32", "--sram-element-count", "2048"};
  auto bounds = [&](std::vector<std::string> extra) {
    return run_with(small, extra);
  };
  const std::string densities_note = "--densities applies to flash1; standard does not take a block mask";
  const Run text = bounds({"--algo", "standard,flash1", "--densities", "0.5,1"});
  CHECK(text.out.starts_with("note: " + densities_note + "\n\n"));
  const Run bounds_json = bounds({"--algo", "standard,flash1", "--densities", "0.5,1", "--json"});
  const Run plain = bounds({"--algo", "standard,flash1", "--json"});
  const auto b = nlohmann::json::parse(bounds_json.out), p = nlohmann::json::parse(plain.out);
  CHECK(b["notes"] == nlohmann::json::array({densities_note}));
  CHECK_FALSE(p.contains("notes"));
  auto rows_of = [](const nlohmann::json& report, const char* room) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : report["rows"])
      if (row["algorithm"] == room) rows.push_back(row);
    return rows;
  };
  CHECK(rows_of(b, "standard").size() == 3);  // N, d and M
  CHECK(rows_of(b, "standard") == rows_of(p, "standard"));
  CHECK(rows_of(b, "flash1") != rows_of(p, "flash1"));  // its s sweep took the densities given
}
