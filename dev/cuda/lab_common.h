// What the kernel labs share: failing loudly on a CUDA error, the median of
// timings, and timing a captured sequence of launches as one CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e = (x);                                                                      \
    if (e != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Captures record(stream) into a graph and replays it: the median of
// `replays` timed replays after 3 untimed ones, in ms.
// `transform`, when given, edits the captured graph before it is instantiated.
inline float time_graph(const std::function<void(cudaStream_t)>& record, int replays = 20,
                        const std::function<void(cudaGraph_t)>& transform = {}) {
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  record(stream);
  CK(cudaStreamEndCapture(stream, &graph));
  if (transform) transform(graph);
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, z;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&z));
  std::vector<float> ms;
  for (int i = 0; i < replays + 3; ++i) {
    CK(cudaEventRecord(a, stream));
    CK(cudaGraphLaunch(exec, stream));
    CK(cudaEventRecord(z, stream));
    CK(cudaEventSynchronize(z));
    float t;
    CK(cudaEventElapsedTime(&t, a, z));
    if (i >= 3) ms.push_back(t);
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(stream));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(z));
  return median(ms);
}
