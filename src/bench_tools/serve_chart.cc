#include "bench_tools/serve_chart.h"

#include <algorithm>
#include <cmath>

#include "bench_tools/png_plot.h"
#include "core/format.h"

namespace exactly::bench_tools {

namespace {

constexpr int kWidth = 900, kHeight = 600;
constexpr int kLeft = 110, kRight = 40, kTop = 70, kBottom = 90;  // plot area margins, pixels
constexpr int kFont = 2;                                          // label scale
constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrid{225, 225, 225};
constexpr Rgb kMedianColor{31, 119, 180}, kP99Color{214, 39, 40};

// A tick step of 1, 2 or 5 times a power of ten giving about `target` ticks.
double nice_step(double range, int target) {
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * magnitude) return m * magnitude;
  return 10 * magnitude;
}

std::string tick_label(double value, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return strformat("%.*f", decimals, value);
}

struct Axis {
  double max = 1, step = 1;  // from 0 to max, ticks every step
  int pixel_from = 0, pixel_to = 0;

  static Axis over(double largest, int from, int to) {
    Axis a;
    if (!(largest > 0) || !std::isfinite(largest)) largest = 1;
    a.step = nice_step(largest * 1.1, 5);
    a.max = std::ceil(largest * 1.1 / a.step) * a.step;
    a.pixel_from = from;
    a.pixel_to = to;
    return a;
  }
  int pixel(double v) const {
    return pixel_from + static_cast<int>(std::lround((v / max) * static_cast<double>(pixel_to - pixel_from)));
  }
};

struct Point {
  double x, y;
  std::string label;
};

void draw_series(Canvas& c, const Axis& xa, const Axis& ya, const std::vector<Point>& pts, Rgb color, bool labels) {
  for (size_t i = 1; i < pts.size(); ++i)
    c.line(xa.pixel(pts[i - 1].x), ya.pixel(pts[i - 1].y), xa.pixel(pts[i].x), ya.pixel(pts[i].y), color, 2);
  for (const Point& p : pts) {
    c.marker(xa.pixel(p.x), ya.pixel(p.y), 5, color);
    if (labels) c.text(xa.pixel(p.x) + 8, ya.pixel(p.y) + 4, p.label, kBlack, 1);
  }
}

void draw_axes(Canvas& c, const Axis& xa, const Axis& ya, const std::string& y_title) {
  const int x0 = xa.pixel_from, x1 = xa.pixel_to, y0 = ya.pixel_from, y1 = ya.pixel_to;
  for (double v = 0; v <= xa.max + xa.step / 2; v += xa.step) {
    const int px = xa.pixel(v);
    c.line(px, y0, px, y1, kGrid);
    c.line(px, y0, px, y0 + 6, kBlack);
    const std::string s = tick_label(v, xa.step);
    c.text(px - Canvas::text_width(s, kFont) / 2, y0 + 12, s, kBlack, kFont);
  }
  for (double v = 0; v <= ya.max + ya.step / 2; v += ya.step) {
    const int py = ya.pixel(v);
    c.line(x0, py, x1, py, kGrid);
    c.line(x0 - 6, py, x0, py, kBlack);
    const std::string s = tick_label(v, ya.step);
    c.text(x0 - 12 - Canvas::text_width(s, kFont), py - Canvas::text_height(kFont) / 2, s, kBlack, kFont);
  }
  c.line(x0, y0, x1, y0, kBlack, 2);
  c.line(x0, y0, x0, y1, kBlack, 2);
  const std::string x_title = "output tokens/s";
  c.text((x0 + x1 - Canvas::text_width(x_title, kFont)) / 2, kHeight - 36, x_title, kBlack, kFont);
  // The font has no rotated glyphs, so the y title sits above its axis.
  c.text(12, kTop - 34, y_title, kBlack, kFont);
}

void draw_legend(Canvas& c) {
  int x = kWidth - kRight - 260;
  const int y = kTop - 34;
  for (auto [name, color] : {std::pair{"median", kMedianColor}, std::pair{"p99", kP99Color}}) {
    c.marker(x + 6, y + 7, 5, color);
    c.text(x + 18, y, name, kBlack, kFont);
    x += 130;
  }
}

}  // namespace

void plot_latency_throughput(const std::vector<ServeSummary>& runs, ChartLatency latency, const std::string& path) {
  std::vector<Point> median, p99;
  for (const ServeSummary& s : runs) {
    const LatencyStats& l = latency == ChartLatency::kTpot ? s.tpot : s.ttft;
    if (l.count == 0) continue;  // every request failed: nothing to place
    const std::string label = std::isinf(s.request_rate) ? "R=INF" : strformat("R=%g", s.request_rate);
    median.push_back({s.output_throughput, l.median_ms, label});
    p99.push_back({s.output_throughput, l.p99_ms, label});
  }
  double x_max = 0, y_max = 0;
  for (const Point& p : p99) {
    x_max = std::max(x_max, p.x);
    y_max = std::max(y_max, p.y);
  }
  Canvas c(kWidth, kHeight, kWhite);
  const Axis xa = Axis::over(x_max, kLeft, kWidth - kRight);
  const Axis ya = Axis::over(y_max, kHeight - kBottom, kTop);
  draw_axes(c, xa, ya, latency == ChartLatency::kTpot ? "TPOT (ms)" : "TTFT (ms)");
  // Median last, so it stays visible where the two series coincide.
  draw_series(c, xa, ya, p99, kP99Color, false);
  draw_series(c, xa, ya, median, kMedianColor, true);
  draw_legend(c);
  write_png(path, c);
}

}  // namespace exactly::bench_tools
