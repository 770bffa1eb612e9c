// The engine thread: the only code that touches the Engine. It admits the
// inbox's submissions, aborts requests whose clients went away, steps, routes
// each output to its request's channel and publishes the metrics.
#pragma once

#include <atomic>
#include <unordered_map>

#include "engine/engine.h"
#include "server/metrics.h"
#include "server/request_queue.h"

namespace exactly::server {

class EngineLoop {
 public:
  EngineLoop(Engine& engine, EngineInbox& inbox, MetricsBoard& metrics)
      : engine_(engine), inbox_(inbox), metrics_(metrics) {}

  // Runs until stop(); then aborts what is in flight (each client receives a
  // final output with no finish reason, which it reports as "abort").
  void run();
  // Any thread.
  void stop();

 private:
  struct Live {  // one engine request
    std::shared_ptr<OutputChannel> channel;
    size_t prompt_index = 0;
    Clock::time_point arrival;
    Clock::time_point last_output;
    Clock::time_point first_token;
    bool got_token = false;
  };

  void admit(Submission& submission);
  void abort_cancelled();
  void route(RequestOutput& output);
  void abort_all();
  void publish();

  Engine& engine_;
  EngineInbox& inbox_;
  MetricsBoard& metrics_;
  std::atomic<bool> stopping_{false};
  std::unordered_map<ClientRequestId, Live> live_;
  MetricsSnapshot snapshot_;
};

}  // namespace exactly::server
