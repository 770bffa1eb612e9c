// A small RGB raster canvas (lines, markers, a built-in 5x7 bitmap font) and
// a PNG encoder for it, enough to draw a benchmark chart with no image
// library. The PNG is uncompressed (deflate "stored" blocks): a chart is a
// few hundred kilobytes, and the file stays readable by every PNG decoder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace exactly::bench_tools {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& pixels() const { return pixels_; }  // [height, width, 3], row-major

  // Drawing outside the canvas is clipped, never an error.
  void set(int x, int y, Rgb c);
  void fill_rect(int x, int y, int w, int h, Rgb c);
  void line(int x0, int y0, int x1, int y1, Rgb c, int thickness = 1);
  void marker(int x, int y, int radius, Rgb c);  // a filled disc
  // Text with its top-left corner at (x, y), each font pixel `scale` wide.
  // Lower case is drawn as upper case; unknown characters as a box.
  void text(int x, int y, std::string_view s, Rgb c, int scale = 1);
  static int text_width(std::string_view s, int scale = 1);
  static int text_height(int scale = 1);

 private:
  int width_, height_;
  std::vector<uint8_t> pixels_;
};

// The PNG file bytes of the canvas (8-bit RGB, no interlace).
std::string encode_png(const Canvas& canvas);

// Throws Error naming the path when it cannot be written.
void write_png(const std::string& path, const Canvas& canvas);

// Checksums of the PNG and zlib formats.
uint32_t crc32(std::string_view bytes, uint32_t crc = 0);
uint32_t adler32(std::string_view bytes);

}  // namespace exactly::bench_tools
