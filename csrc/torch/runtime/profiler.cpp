// torch.profiler for device tpu.
//
// Two ways in, one recording underneath:
//  - torch.profiler.profile(activities=[CPU, PrivateUse1]) (Kineto): a
//    Kineto child profiler whose session puts every program the engine ran
//    on a "TPU" track, each linked to the op that launched it, so
//    key_averages() shows tpu time per op and the Chrome trace shows the
//    programs;
//  - torch.autograd.profiler.profile(use_device="tpu") (PyTorch's legacy
//    device timing, ProfilerStubs): record() marks a point in the same
//    recording and elapsed() is the device time of the programs launched
//    between two marks.
// Device time is the engine's: each launch is timed from the moment the
// device could start it (its launch, or the end of the device's previous
// program, whichever is later) to its completion event. Compiles come from
// the engine's trace hook as "tpu::compile" ranges on the compiling thread;
// transfers are "tpu::to_device" / "tpu::to_host" ranges (aten/tensor_kernels.cpp).
// With no profiler running the engine has no hook: nothing is timed.

// Kineto's activity metadata formats with fmt, which libtorch does not
// export: this file compiles the part it uses.
#define FMT_HEADER_ONLY 1

#include "runtime/runtime.h"

#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/stubs/base.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#if __has_include(<kineto/libkineto.h>) && __has_include(<kineto/output_base.h>)
#define TORCHTPU_KINETO 1
#include <kineto/libkineto.h>
#include <kineto/output_base.h>
#else
#define TORCHTPU_KINETO 0
#endif

namespace py = pybind11;

namespace torchtpu {

namespace {

// ------------------------------------------------------------ recording

// One program launch, as the engine reported it.
struct Launch {
  uint64_t number = 0;      // the engine's launch number
  int device = 0;
  int n_ops = 0;
  std::string what;         // the program: op name, "fused window (N ops)"
  uint64_t correlation = 0; // innermost profiled op on the launching thread
  int64_t launched_ns = 0;  // CLOCK_MONOTONIC
  int64_t done_ns = 0;      // CLOCK_MONOTONIC, 0 until DONE
  bool finished = false;    // DONE arrived
  bool timed = false;       // DONE carried a completion time
  // Device interval (CLOCK_MONOTONIC), set by Recording::settle_locked().
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// What one profiling session collected. Shared by the session, the marks
// of the legacy path (which outlive it: PyTorch reads them after the
// profiler stopped) and the DONE reports still on their way.
class Recording {
 public:
  explicit Recording(bool legacy) : legacy_(legacy) {}

  bool legacy() const {
    return legacy_;
  }

  void add(Launch launch) {
    std::lock_guard<std::mutex> lock(mu_);
    index_[launch.number] = launches_.size();
    launches_.push_back(std::move(launch));
    settled_ = false;
  }

  void finish(uint64_t number, int64_t done_ns, bool timed) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(number);
    if (it == index_.end()) {
      return;
    }
    Launch& launch = launches_[it->second];
    launch.finished = true;
    launch.timed = timed;
    launch.done_ns = done_ns;
    while (first_unfinished_ < launches_.size() &&
           launches_[first_unfinished_].finished) {
      ++first_unfinished_;
    }
    settled_ = false;
    done_.notify_all();
  }

  // Launches so far: a mark of the legacy path.
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return launches_.size();
  }

  // Device nanoseconds of launches [begin, end).
  int64_t device_ns(size_t begin, size_t end) {
    std::unique_lock<std::mutex> lock(mu_);
    end = std::min(end, launches_.size());
    settle_locked(lock, end);
    int64_t total = 0;
    for (size_t k = std::min(begin, end); k < end; ++k) {
      total += launches_[k].end_ns - launches_[k].start_ns;
    }
    return total;
  }

  // Every launch with its device interval.
  std::vector<Launch> all() {
    std::unique_lock<std::mutex> lock(mu_);
    settle_locked(lock, launches_.size());
    return launches_;
  }

 private:
  // Gives launches their device intervals, once those before `end` have
  // their DONE. The profiler waited for the device before stopping, so
  // DONE reports are at most a plugin callback away; the bound only keeps
  // a lost one from hanging the reader (it then counts nothing).
  //
  // A device runs its programs one after another: a program starts when
  // it was launched or when the device's previous program ended, whichever
  // is later. Completion times are when the plugin's callback ran, so a
  // busy machine can report the previous program's end after this one's;
  // then that end says nothing about this program, which gets the time
  // from its launch instead.
  void settle_locked(std::unique_lock<std::mutex>& lock, size_t end) {
    done_.wait_for(lock, std::chrono::seconds(10),
                   [&] { return first_unfinished_ >= end; });
    if (settled_) {
      return;
    }
    std::unordered_map<int, int64_t> busy_until;
    for (Launch& launch : launches_) {
      if (!launch.finished || !launch.timed) {
        launch.start_ns = launch.end_ns = 0;
        continue;
      }
      int64_t& busy = busy_until[launch.device];
      launch.end_ns = std::max(launch.done_ns, launch.launched_ns);
      launch.start_ns = busy < launch.end_ns ? std::max(launch.launched_ns, busy)
                                             : launch.launched_ns;
      busy = std::max(busy, launch.end_ns);
    }
    settled_ = true;
  }

  const bool legacy_;
  std::mutex mu_;
  std::condition_variable done_;
  std::vector<Launch> launches_;
  std::unordered_map<uint64_t, size_t> index_;
  size_t first_unfinished_ = 0;
  bool settled_ = true;
};

// The correlation ids Kineto pushes around every profiled op on this
// thread (Kineto sessions only): a launch belongs to the innermost one.
thread_local std::vector<uint64_t> correlation_stack;
// Set while this thread runs the engine's hook (the runtime's lock held):
// nothing reached from it may call into the engine.
thread_local bool in_engine_hook = false;

// "tpu::compile" ranges opened at COMPILE_BEGIN, closed at COMPILE_END. A
// profile recording shapes also gets the program's name (a keyword input:
// the trace's "program" argument).
thread_local std::vector<std::unique_ptr<at::RecordFunction>> open_compiles;

void begin_compile(const char* what) {
  std::unique_ptr<at::RecordFunction> range;
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::FUNCTION);
  if (C10_UNLIKELY(callbacks.has_value())) {
    range = std::make_unique<at::RecordFunction>(std::move(*callbacks));
    if (range->isActive()) {
      if (range->needsInputs()) {
        const std::unordered_map<std::string, c10::IValue> program = {
            {"program", c10::IValue(std::string(what != nullptr ? what : ""))}};
        range->before("tpu::compile", &program);
      } else {
        range->before("tpu::compile");
      }
    }
  }
  open_compiles.push_back(std::move(range));
}

void end_compile() {
  if (!open_compiles.empty()) {
    open_compiles.pop_back();  // the RecordFunction's destructor ends it
  }
}

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Between the engine's clock (CLOCK_MONOTONIC, std::chrono::steady_clock
// here) and the profiler's (Unix time in nanoseconds).
int64_t unix_minus_monotonic_ns() {
  const int64_t unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  return unix_ns - monotonic_ns();
}

// The engine's trace hook and the recording it feeds. Process-wide and
// never destroyed: DONE reports come from plugin threads, possibly while
// the interpreter exits.
class Tracer {
 public:
  static Tracer& get() {
    static Tracer* tracer = new Tracer();
    return *tracer;
  }

  // A Kineto session starts: compiles are reported, launches timed when
  // the session wants device activity.
  std::shared_ptr<Recording> start(bool device_time) {
    auto recording = std::make_shared<Recording>(/*legacy=*/false);
    ttpu_runtime* rt = nullptr;
    try {
      // A session that wants device time starts the runtime (its first op
      // would); one that does not only watches an existing runtime.
      rt = device_time ? runtime() : runtime_if_created();
    } catch (const std::exception&) {
      rt = nullptr;  // no plugin: there is nothing to trace
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = recording;
      wanted_ = TTPU_TRACE_COMPILES | (device_time ? TTPU_TRACE_LAUNCHES : 0u);
    }
    install(rt);
    return recording;
  }

  void stop(const std::shared_ptr<Recording>& recording) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (current_ != recording) {
        return;
      }
      current_.reset();
      wanted_ = 0;
    }
    install(runtime_if_created());
  }

  // The legacy path's recording, started by its first mark. It ends at the
  // first launch or compile after the profiler stopped (still_wanted).
  std::shared_ptr<Recording> legacy_recording() {
    std::shared_ptr<Recording> recording;
    bool started = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!current_ || !current_->legacy()) {
        current_ = std::make_shared<Recording>(/*legacy=*/true);
        wanted_ = TTPU_TRACE_COMPILES | TTPU_TRACE_LAUNCHES;
        started = true;
      }
      recording = current_;
    }
    // A mark taken inside the engine's hook (a profiled tpu::compile) must
    // not call into the engine; the hook is in place then anyway.
    if (!in_engine_hook && (started || installed_.load() != wanted())) {
      install(runtime_if_created());
    }
    return recording;
  }

  unsigned installed() const {
    return installed_.load();
  }

  static unsigned on_event(void* user, const ttpu_trace_event* event) noexcept {
    auto* self = static_cast<Tracer*>(user);
    const bool was_in_hook = in_engine_hook;
    in_engine_hook = true;
    unsigned keep = 0;
    try {
      keep = self->handle(*event);
    } catch (...) {
      // A profiler must never break the program it watches.
    }
    in_engine_hook = was_in_hook;
    return keep;
  }

 private:
  unsigned wanted() {
    std::lock_guard<std::mutex> lock(mu_);
    return wanted_;
  }

  // Makes the engine's hook what the current recording wants. Never
  // called with mu_ held, nor from inside the hook (it takes the
  // runtime's lock, which the hook runs under).
  void install(ttpu_runtime* rt) {
    if (rt == nullptr) {
      return;
    }
    // Again if the wish changed meanwhile (another thread's start or stop).
    for (unsigned what = wanted();; ) {
      ttpu_status* status =
          ttpu_runtime_set_trace_hook(rt, what ? &Tracer::on_event : nullptr,
                                      this, what);
      if (status != nullptr) {
        ttpu_status_free(status);  // a forked child: nothing to trace
        return;
      }
      installed_.store(what);
      const unsigned now = wanted();
      if (now == what) {
        return;
      }
      what = now;
    }
  }

  unsigned handle(const ttpu_trace_event& event) {
    switch (event.kind) {
      case TTPU_TRACE_COMPILE_BEGIN:
        begin_compile(event.what);
        return 0;  // ignored by the engine
      case TTPU_TRACE_COMPILE_END:
        end_compile();
        return still_wanted();
      case TTPU_TRACE_LAUNCH:
        return launched(event);
      case TTPU_TRACE_DONE:
        finished(event);
        return 0;  // ignored by the engine
    }
    return still_wanted();
  }

  // What the hook should report from now on (from COMPILE_END and LAUNCH,
  // under the runtime's lock). A legacy recording ends here once the
  // profiler that started it has stopped: PyTorch tells its device timing
  // no "stop", and the engine's lock rules out removing the hook from here
  // by a call, so the answer removes it.
  unsigned still_wanted() {
    std::lock_guard<std::mutex> lock(mu_);
    if (current_ && current_->legacy() &&
        !torch::autograd::profiler::isProfilerEnabledInMainThread()) {
      current_.reset();
      wanted_ = 0;
    }
    installed_.store(wanted_);
    return wanted_;
  }

  unsigned launched(const ttpu_trace_event& event) {
    const unsigned keep = still_wanted();
    std::shared_ptr<Recording> recording;
    {
      std::lock_guard<std::mutex> lock(mu_);
      recording = current_;
      if (recording) {
        in_flight_[event.launch] = recording;
      }
    }
    if (!recording) {
      return keep;
    }
    Launch launch;
    launch.number = event.launch;
    launch.device = event.device;
    launch.n_ops = event.n_ops;
    launch.what = event.what != nullptr ? event.what : "program";
    launch.correlation = correlation_stack.empty() ? 0 : correlation_stack.back();
    launch.launched_ns = event.time_ns;
    recording->add(std::move(launch));
    return keep;
  }

  void finished(const ttpu_trace_event& event) {
    std::shared_ptr<Recording> recording;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = in_flight_.find(event.launch);
      if (it == in_flight_.end()) {
        return;
      }
      recording = it->second.lock();
      in_flight_.erase(it);
    }
    if (recording) {
      recording->finish(event.launch, event.time_ns, !event.failed);
    }
  }

  std::mutex mu_;
  std::shared_ptr<Recording> current_;
  unsigned wanted_ = 0;
  std::atomic<unsigned> installed_{0};
  std::unordered_map<uint64_t, std::weak_ptr<Recording>> in_flight_;
};

// ------------------------------------------------------------ legacy path

// A point in a recording: the launches made before it.
struct Mark {
  std::shared_ptr<Recording> recording;
  size_t launches = 0;
};

struct TpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device,
              torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) {
      *device = current_device();
    }
    try {
      auto mark = std::make_shared<Mark>();
      mark->recording = Tracer::get().legacy_recording();
      mark->launches = mark->recording->size();
      *event = std::move(mark);
    } catch (...) {
      *event = nullptr;  // no time for this op rather than a broken op
    }
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
  }

  // Microseconds the device spent on the programs launched between the
  // two marks.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* event1,
                const torch::profiler::impl::ProfilerVoidEventStub* event2)
      const override {
    const auto* a = event1 ? static_cast<const Mark*>(event1->get()) : nullptr;
    const auto* b = event2 ? static_cast<const Mark*>(event2->get()) : nullptr;
    if (a == nullptr || b == nullptr || a->recording != b->recording ||
        b->launches <= a->launches) {
      return 0.0f;
    }
    const int64_t ns = a->recording->device_ns(a->launches, b->launches);
    return static_cast<float>(static_cast<double>(ns) / 1000.0);
  }

  // The engine has no annotation channel of its own (PyTorch's
  // RecordFunction ranges are what the trace shows).
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    c10::DeviceGuard guard(tpu_device(current_device()));
    const int count = device_count_noexcept();
    for (int device = 0; device < count; ++device) {
      guard.set_index(static_cast<c10::DeviceIndex>(device));
      op(device);
    }
  }

  void synchronize() const override {
    ttpu_runtime* rt = runtime_if_created();
    if (rt != nullptr) {
      check(ttpu_runtime_synchronize(rt, -1), "tpu synchronize");
    }
  }
};

#if TORCHTPU_KINETO

// ------------------------------------------------------------ Kineto

constexpr libkineto::ActivityType kDeviceActivity =
    libkineto::ActivityType::CONCURRENT_KERNEL;

class TpuSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit TpuSession(bool device_time) : device_time_(device_time) {}

  void start() override {
    recording_ = Tracer::get().start(device_time_);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    Tracer::get().stop(recording_);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return {};
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked,
                    int64_t /*start_time*/, int64_t /*end_time*/) override {
    if (!device_time_ || !recording_) {
      return;
    }
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->gpuOpCount = 0;
    const int64_t to_unix = unix_minus_monotonic_ns();
    for (const Launch& launch : recording_->all()) {
      if (!launch.timed) {
        continue;
      }
      buffer_->emplace_activity(buffer_->span, kDeviceActivity, launch.what);
      libkineto::GenericTraceActivity& activity = *buffer_->activities.back();
      activity.startTime = launch.start_ns + to_unix;
      activity.endTime = launch.end_ns + to_unix;
      activity.id = static_cast<int32_t>(launch.correlation);
      activity.device = launch.device;
      activity.resource = 0;
      activity.threadId = 0;
      if (linked && launch.correlation != 0) {
        activity.linked = linked(static_cast<int32_t>(launch.correlation));
      }
      activity.addMetadata("device", launch.device);
      activity.addMetadata("stream", 0);
      activity.addMetadata("correlation", launch.correlation);
      activity.addMetadata("ops", launch.n_ops);
      devices_.push_back(launch.device);
      buffer_->gpuOpCount++;
      logger.handleActivity(activity);
    }
    std::sort(devices_.begin(), devices_.end());
    devices_.erase(std::unique(devices_.begin(), devices_.end()), devices_.end());
    if (buffer_->activities.empty()) {
      buffer_.reset();  // nothing ran: no TPU track
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (devices_.empty()) {
      return nullptr;
    }
    const int device = devices_.front();
    return std::unique_ptr<libkineto::DeviceInfo>(new libkineto::DeviceInfo{
        device, libkineto::kExceedMaxPid + device, "torchtpu",
        "TPU " + std::to_string(device)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (int device : devices_) {
      infos.push_back(libkineto::ResourceInfo{0, 0, device, "tpu programs"});
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override {
    correlation_stack.push_back(id);
  }

  void popCorrelationId() override {
    if (!correlation_stack.empty()) {
      correlation_stack.pop_back();
    }
  }

 private:
  const bool device_time_;
  std::shared_ptr<Recording> recording_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::vector<int> devices_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    static const std::string name = "torchtpu";
    return name;
  }

  const std::set<libkineto::ActivityType>& availableActivities() const override {
    static const std::set<libkineto::ActivityType> activities = {kDeviceActivity};
    return activities;
  }

  // Every profile gets a session: one without device activity still shows
  // compiles; with ProfilerActivity.PrivateUse1 it also times programs.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    return std::make_unique<TpuSession>(activity_types.count(kDeviceActivity) > 0);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/,
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }
};

#endif  // TORCHTPU_KINETO

}  // namespace

void init_profiler(py::module_& m) {
  static TpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
#if TORCHTPU_KINETO
  libkineto::api().registerProfilerFactory(
      [] { return std::make_unique<TpuActivityProfiler>(); });
#endif
  m.def("_profiler_hook", [] { return Tracer::get().installed(); },
        "TTPU_TRACE_* bits the engine's trace hook reports now (0: none).");
  m.def("_profiler_has_kineto", [] { return TORCHTPU_KINETO != 0; });
}

}  // namespace torchtpu
