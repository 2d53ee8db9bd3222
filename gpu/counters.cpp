// CUPTI Range Profiler: one user range per measure(), user replay until every pass is submitted,
// then the counter data image is decoded and evaluated on the host (cupti_profiler_host.h).
// The CUPTI entry points are looked up with dlopen/dlsym, so nothing links against libcupti.
#include "gpu/counters.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cuda_util.hpp"

#if __has_include(<cupti_range_profiler.h>) && __has_include(<cupti_profiler_host.h>)
#define HBMLAB_HAVE_CUPTI_HEADERS 1
#include <cuda.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#endif

namespace hbmlab::gpu {

#if HBMLAB_HAVE_CUPTI_HEADERS
namespace {

// The traffic metrics, then the on-chip ones (read only when asked); the wavefront is 128 bytes.
const char* kMetrics[] = {"dram__bytes_read.sum",
                          "dram__bytes_write.sum",
                          "lts__t_sectors_srcunit_tex_op_read.sum",
                          "lts__t_sectors_srcunit_tex_op_write.sum",
                          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                          "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                          "smsp__inst_executed_op_ldsm.sum",
                          "smsp__inst_executed_pipe_tensor_op_hmma.sum",
                          "sm__inst_executed_pipe_xu.sum",
                          "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"};
constexpr std::size_t kTrafficMetrics = 4, kAllMetrics = sizeof(kMetrics) / sizeof(kMetrics[0]);

// [SECTION] the CUPTI entry points, resolved at run time
struct Cupti {
  void* lib = nullptr;
#define HBMLAB_CUPTI_FN(name) decltype(&::name) name = nullptr;
  HBMLAB_CUPTI_FN(cuptiGetResultString)
  HBMLAB_CUPTI_FN(cuptiProfilerInitialize)
  HBMLAB_CUPTI_FN(cuptiDeviceGetChipName)
  HBMLAB_CUPTI_FN(cuptiProfilerGetCounterAvailability)
  HBMLAB_CUPTI_FN(cuptiProfilerHostInitialize)
  HBMLAB_CUPTI_FN(cuptiProfilerHostDeinitialize)
  HBMLAB_CUPTI_FN(cuptiProfilerHostConfigAddMetrics)
  HBMLAB_CUPTI_FN(cuptiProfilerHostGetConfigImageSize)
  HBMLAB_CUPTI_FN(cuptiProfilerHostGetConfigImage)
  HBMLAB_CUPTI_FN(cuptiProfilerHostEvaluateToGpuValues)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerEnable)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerDisable)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerGetCounterDataSize)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerCounterDataImageInitialize)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerSetConfig)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerStart)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerStop)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerPushRange)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerPopRange)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerDecodeData)
  HBMLAB_CUPTI_FN(cuptiRangeProfilerGetCounterDataInfo)
#undef HBMLAB_CUPTI_FN
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;

  bool load(std::string* why) {
    for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                             "/usr/local/cuda/lib64/libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) {
      *why = "libcupti.so not found (add the CUDA toolkit's lib64 to LD_LIBRARY_PATH)";
      return false;
    }
#define HBMLAB_CUPTI_SYM(name)                                                       \
  name = reinterpret_cast<decltype(name)>(dlsym(lib, #name));                        \
  if (!name) {                                                                       \
    *why = std::string("libcupti has no ") + #name + " (CUPTI older than CUDA 12.6)"; \
    return false;                                                                    \
  }
    HBMLAB_CUPTI_SYM(cuptiGetResultString)
    HBMLAB_CUPTI_SYM(cuptiProfilerInitialize)
    HBMLAB_CUPTI_SYM(cuptiDeviceGetChipName)
    HBMLAB_CUPTI_SYM(cuptiProfilerGetCounterAvailability)
    HBMLAB_CUPTI_SYM(cuptiProfilerHostInitialize)
    HBMLAB_CUPTI_SYM(cuptiProfilerHostDeinitialize)
    HBMLAB_CUPTI_SYM(cuptiProfilerHostConfigAddMetrics)
    HBMLAB_CUPTI_SYM(cuptiProfilerHostGetConfigImageSize)
    HBMLAB_CUPTI_SYM(cuptiProfilerHostGetConfigImage)
    HBMLAB_CUPTI_SYM(cuptiProfilerHostEvaluateToGpuValues)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerEnable)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerDisable)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerGetCounterDataSize)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerCounterDataImageInitialize)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerSetConfig)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerStart)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerStop)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerPushRange)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerPopRange)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerDecodeData)
    HBMLAB_CUPTI_SYM(cuptiRangeProfilerGetCounterDataInfo)
#undef HBMLAB_CUPTI_SYM
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!driver) driver = dlopen("libcuda.so.1", RTLD_NOW);
    if (driver) ctx_get_current = reinterpret_cast<decltype(ctx_get_current)>(dlsym(driver, "cuCtxGetCurrent"));
    if (!ctx_get_current) {
      *why = "libcuda.so.1 has no cuCtxGetCurrent";
      return false;
    }
    return true;
  }

  void check(CUptiResult r, const char* call) const {
    if (r == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    if (cuptiGetResultString) cuptiGetResultString(r, &text);
    throw std::runtime_error(std::string(call) + " failed: " + (text ? text : "CUPTI error ") +
                             (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
                                  ? " (profiling needs permission: run as root or set NVreg_RestrictProfilingToAdminUsers=0)"
                                  : ""));
  }
};
#define CUPTI_CALL(cupti, fn, params) (cupti).check((cupti).fn(&(params)), #fn)

template <typename P> P params(std::size_t size) {
  P p{};
  p.structSize = size;
  return p;
}

class CuptiRangeCounters final : public RangeCounters {
 public:
  bool init(std::string* why, bool on_chip) {
    metrics_ = on_chip ? kAllMetrics : kTrafficMetrics;
    if (!c_.load(why)) return false;
    try {
      CUDA_CHECK(cudaFree(nullptr));  // make the primary context current
      CUcontext ctx = nullptr;
      if (c_.ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr) throw std::runtime_error("no current CUDA context");
      auto ip = params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
      CUPTI_CALL(c_, cuptiProfilerInitialize, ip);
      int device = 0;
      CUDA_CHECK(cudaGetDevice(&device));
      auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
      chip.deviceIndex = static_cast<std::size_t>(device);
      CUPTI_CALL(c_, cuptiDeviceGetChipName, chip);
      auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
          CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
      avail.ctx = ctx;
      CUPTI_CALL(c_, cuptiProfilerGetCounterAvailability, avail);
      availability_.resize(avail.counterAvailabilityImageSize);
      avail.pCounterAvailabilityImage = availability_.data();
      CUPTI_CALL(c_, cuptiProfilerGetCounterAvailability, avail);

      auto host = params<CUpti_Profiler_Host_Initialize_Params>(CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
      host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
      host.pChipName = chip.pChipName;
      host.pCounterAvailabilityImage = availability_.data();
      CUPTI_CALL(c_, cuptiProfilerHostInitialize, host);
      host_ = host.pHostObject;
      auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
      add.pHostObject = host_;
      add.ppMetricNames = kMetrics;
      add.numMetrics = metrics_;
      CUPTI_CALL(c_, cuptiProfilerHostConfigAddMetrics, add);
      auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
          CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
      size.pHostObject = host_;
      CUPTI_CALL(c_, cuptiProfilerHostGetConfigImageSize, size);
      config_.resize(size.configImageSize);
      auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
      image.pHostObject = host_;
      image.configImageSize = config_.size();
      image.pConfigImage = config_.data();
      CUPTI_CALL(c_, cuptiProfilerHostGetConfigImage, image);

      auto enable = params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
      enable.ctx = ctx;
      CUPTI_CALL(c_, cuptiRangeProfilerEnable, enable);
      profiler_ = enable.pRangeProfilerObject;
      auto ds = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
          CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
      ds.pRangeProfilerObject = profiler_;
      ds.pMetricNames = kMetrics;
      ds.numMetrics = metrics_;
      ds.maxNumOfRanges = 1;
      ds.maxNumRangeTreeNodes = 1;
      CUPTI_CALL(c_, cuptiRangeProfilerGetCounterDataSize, ds);
      counter_data_.resize(ds.counterDataSize);
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
    return true;
  }

  ~CuptiRangeCounters() override {
    if (profiler_) {
      auto d = params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
      d.pRangeProfilerObject = profiler_;
      c_.cuptiRangeProfilerDisable(&d);
    }
    if (host_) {
      auto d = params<CUpti_Profiler_Host_Deinitialize_Params>(CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      d.pHostObject = host_;
      c_.cuptiProfilerHostDeinitialize(&d);
    }
  }

  TrafficCounters measure(const std::function<void()>& launches, const std::function<void()>& before_pass) override {
    auto init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    init.pRangeProfilerObject = profiler_;
    init.counterDataSize = counter_data_.size();
    init.pCounterData = counter_data_.data();
    CUPTI_CALL(c_, cuptiRangeProfilerCounterDataImageInitialize, init);
    auto cfg = params<CUpti_RangeProfiler_SetConfig_Params>(CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    cfg.pRangeProfilerObject = profiler_;
    cfg.configSize = config_.size();
    cfg.pConfig = config_.data();
    cfg.counterDataImageSize = counter_data_.size();
    cfg.pCounterDataImage = counter_data_.data();
    cfg.range = CUPTI_UserRange;
    cfg.replayMode = CUPTI_UserReplay;
    cfg.maxRangesPerPass = 1;
    cfg.numNestingLevels = 1;
    cfg.minNestingLevel = 1;
    cfg.passIndex = 0;
    cfg.targetNestingLevel = 1;
    CUPTI_CALL(c_, cuptiRangeProfilerSetConfig, cfg);
    TrafficCounters out;
    for (bool done = false; !done && out.passes < 64;) {
      if (before_pass) before_pass();
      CUDA_CHECK(cudaDeviceSynchronize());
      auto start = params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
      start.pRangeProfilerObject = profiler_;
      CUPTI_CALL(c_, cuptiRangeProfilerStart, start);
      auto push = params<CUpti_RangeProfiler_PushRange_Params>(CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE);
      push.pRangeProfilerObject = profiler_;
      push.pRangeName = "hbmlab";
      CUPTI_CALL(c_, cuptiRangeProfilerPushRange, push);
      launches();
      auto pop = params<CUpti_RangeProfiler_PopRange_Params>(CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE);
      pop.pRangeProfilerObject = profiler_;
      CUPTI_CALL(c_, cuptiRangeProfilerPopRange, pop);
      auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
      stop.pRangeProfilerObject = profiler_;
      CUPTI_CALL(c_, cuptiRangeProfilerStop, stop);
      CUDA_CHECK(cudaDeviceSynchronize());
      ++out.passes;
      done = stop.isAllPassSubmitted != 0;
    }
    auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    decode.pRangeProfilerObject = profiler_;
    CUPTI_CALL(c_, cuptiRangeProfilerDecodeData, decode);
    auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = counter_data_.data();
    info.counterDataImageSize = counter_data_.size();
    CUPTI_CALL(c_, cuptiRangeProfilerGetCounterDataInfo, info);
    if (info.numTotalRanges < 1) throw std::runtime_error("CUPTI range profiler recorded no range");
    double values[kAllMetrics] = {};
    auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
    eval.pHostObject = host_;
    eval.pCounterDataImage = counter_data_.data();
    eval.counterDataImageSize = counter_data_.size();
    eval.rangeIndex = 0;
    eval.ppMetricNames = kMetrics;
    eval.numMetrics = metrics_;
    eval.pMetricValues = values;
    CUPTI_CALL(c_, cuptiProfilerHostEvaluateToGpuValues, eval);
    out.dram_read_bytes = values[0];
    out.dram_write_bytes = values[1];
    out.l2_sm_read_bytes = values[2] * 32;
    out.l2_sm_write_bytes = values[3] * 32;
    if (metrics_ == kAllMetrics) {
      out.on_chip = true;
      out.smem_ld_bytes = values[4] * 128;
      out.smem_st_bytes = values[5] * 128;
      out.ldmatrix_instructions = values[6];
      out.mma_instructions = values[7];
      out.ex2_instructions = values[8];
      out.tensor_pipe_busy = values[9] / 100;
    }
    return out;
  }

 private:
  Cupti c_;
  std::vector<std::uint8_t> availability_, config_, counter_data_;
  std::size_t metrics_ = kTrafficMetrics;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* profiler_ = nullptr;
};

}  // namespace

std::unique_ptr<RangeCounters> RangeCounters::create(std::string* why_not, bool on_chip) {
  auto counters = std::make_unique<CuptiRangeCounters>();
  if (!counters->init(why_not, on_chip)) return nullptr;
  return counters;
}
#else
std::unique_ptr<RangeCounters> RangeCounters::create(std::string* why_not, bool) {
  *why_not = "built without the CUPTI Range Profiler headers (cupti_range_profiler.h, CUDA 12.6+)";
  return nullptr;
}
#endif

}  // namespace hbmlab::gpu
