// A 5x7 bitmap font for chart labels: digits, upper-case letters and the
// punctuation that numbers and units need.
#pragma once

namespace exactly::bench_tools {

constexpr int kGlyphWidth = 5;
constexpr int kGlyphHeight = 7;

// 35 characters, row by row, '#' for ink; nullptr for a character the font lacks.
const char* glyph_rows(char c);

}  // namespace exactly::bench_tools
