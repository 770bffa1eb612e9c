// What the GPU's mixture-of-experts kernels (moe.h) take, without CUDA's
// headers: the loader refuses other models by name before touching a GPU.
#pragma once

namespace exactly::kernels::cuda {

inline constexpr int kMoeMaxExperts = 512;
inline constexpr int kMoeMaxChosen = 16;
inline constexpr int kMoeTileRows = 64;  // rows of a group per tile of the products
inline constexpr int kMoeTileCols = 64;  // output columns per tile: N a multiple of it
inline constexpr int kMoeTileK = 64;     // K a multiple of it

}  // namespace exactly::kernels::cuda
