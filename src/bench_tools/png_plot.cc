#include "bench_tools/png_plot.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>

#include "bench_tools/png_font.h"
#include "core/error.h"

namespace exactly::bench_tools {

namespace {

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[n] = c;
  }
  return t;
}

constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

void put_u32_be(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

void put_u16_le(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xFF));
  out.push_back(static_cast<char>((v >> 8) & 0xFF));
}

// A PNG chunk: length, type, data, CRC of type and data.
void put_chunk(std::string& out, std::string_view type, std::string_view data) {
  put_u32_be(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.append(type);
  out.append(data);
  put_u32_be(out, crc32(std::string_view(out).substr(type_at)));
}

// A zlib stream holding `raw` in deflate stored blocks (at most 65535 bytes each).
std::string zlib_stored(std::string_view raw) {
  std::string z;
  z.push_back(0x78);  // deflate, 32 KiB window
  z.push_back(0x01);  // no dictionary, fastest level; 0x7801 is divisible by 31
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(65535, raw.size() - at);
    const bool final_block = at + n == raw.size();
    z.push_back(final_block ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
    put_u16_le(z, static_cast<uint32_t>(n));
    put_u16_le(z, static_cast<uint32_t>(~n & 0xFFFF));
    z.append(raw.substr(at, n));
    at += n;
  } while (at < raw.size());
  put_u32_be(z, adler32(raw));
  return z;
}

}  // namespace

uint32_t crc32(std::string_view bytes, uint32_t crc) {
  crc = ~crc;
  for (char ch : bytes) crc = kCrcTable[(crc ^ static_cast<uint8_t>(ch)) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(std::string_view bytes) {
  uint32_t a = 1, b = 0;
  for (char ch : bytes) {
    a = (a + static_cast<uint8_t>(ch)) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

Canvas::Canvas(int width, int height, Rgb background)
    : width_(width), height_(height), pixels_(static_cast<size_t>(width) * static_cast<size_t>(height) * 3) {
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = background.r;
    pixels_[i + 1] = background.g;
    pixels_[i + 2] = background.b;
  }
}

void Canvas::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const size_t i = (static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)) * 3;
  pixels_[i] = c.r;
  pixels_[i + 1] = c.g;
  pixels_[i + 2] = c.b;
}

void Canvas::fill_rect(int x, int y, int w, int h, Rgb c) {
  for (int dy = 0; dy < h; ++dy)
    for (int dx = 0; dx < w; ++dx) set(x + dx, y + dy, c);
}

void Canvas::line(int x0, int y0, int x1, int y1, Rgb c, int thickness) {
  // Bresenham; thickness as a square brush centred on the line.
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  const int half = (thickness - 1) / 2;
  int err = dx + dy;
  for (;;) {
    fill_rect(x0 - half, y0 - half, thickness, thickness, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void Canvas::marker(int x, int y, int radius, Rgb c) {
  for (int dy = -radius; dy <= radius; ++dy)
    for (int dx = -radius; dx <= radius; ++dx)
      if (dx * dx + dy * dy <= radius * radius) set(x + dx, y + dy, c);
}

void Canvas::text(int x, int y, std::string_view s, Rgb c, int scale) {
  for (char ch : s) {
    const char* rows = glyph_rows(ch);
    for (int gy = 0; gy < kGlyphHeight; ++gy)
      for (int gx = 0; gx < kGlyphWidth; ++gx) {
        const bool border = gx == 0 || gy == 0 || gx == kGlyphWidth - 1 || gy == kGlyphHeight - 1;
        const bool ink = rows ? rows[gy * kGlyphWidth + gx] == '#' : border;
        if (ink) fill_rect(x + gx * scale, y + gy * scale, scale, scale, c);
      }
    x += (kGlyphWidth + 1) * scale;
  }
}

int Canvas::text_width(std::string_view s, int scale) {
  return s.empty() ? 0 : static_cast<int>(s.size()) * (kGlyphWidth + 1) * scale - scale;
}

int Canvas::text_height(int scale) { return kGlyphHeight * scale; }

std::string encode_png(const Canvas& canvas) {
  const size_t row_bytes = static_cast<size_t>(canvas.width()) * 3;
  std::string raw;
  raw.reserve((row_bytes + 1) * static_cast<size_t>(canvas.height()));
  const auto* px = reinterpret_cast<const char*>(canvas.pixels().data());
  for (int y = 0; y < canvas.height(); ++y) {
    raw.push_back(0);  // filter type None
    raw.append(px + static_cast<size_t>(y) * row_bytes, row_bytes);
  }
  std::string header;
  put_u32_be(header, static_cast<uint32_t>(canvas.width()));
  put_u32_be(header, static_cast<uint32_t>(canvas.height()));
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, adaptive filters, no interlace
  std::string png("\x89PNG\r\n\x1a\n", 8);
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", zlib_stored(raw));
  put_chunk(png, "IEND", "");
  return png;
}

void write_png(const std::string& path, const Canvas& canvas) {
  const std::string bytes = encode_png(canvas);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("cannot write " + path);
}

}  // namespace exactly::bench_tools
