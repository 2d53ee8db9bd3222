// Checks that a screenshot of the window is a real picture, not a blank or single-colour frame:
// enough distinct colours and enough spread in brightness. Run: check_png FILE.png [min_width min_height]
#include <stb_image.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: check_png FILE.png [min_width min_height]\n");
    return 2;
  }
  const int min_w = argc > 3 ? std::atoi(argv[2]) : 320, min_h = argc > 3 ? std::atoi(argv[3]) : 240;
  int w = 0, h = 0, channels = 0;
  unsigned char* px = stbi_load(argv[1], &w, &h, &channels, 3);
  if (!px) {
    std::fprintf(stderr, "check_png: %s: cannot read (%s)\n", argv[1], stbi_failure_reason());
    return 1;
  }
  std::unordered_set<unsigned> colours;
  double sum = 0, sum2 = 0;
  const long n = static_cast<long>(w) * h;
  for (long k = 0; k < n; ++k) {
    const unsigned char* p = px + 3 * k;
    colours.insert(unsigned(p[0]) << 16 | unsigned(p[1]) << 8 | p[2]);
    const double y = 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
    sum += y;
    sum2 += y * y;
  }
  stbi_image_free(px);
  const double mean = sum / double(n), sd = std::sqrt(std::max(0.0, sum2 / double(n) - mean * mean));
  std::printf("check_png: %s: %d×%d, %zu distinct colours, brightness %.1f ± %.1f\n", argv[1], w, h, colours.size(), mean, sd);
  // A blank window has one or two colours; the panels draw text in many shades and tensors in nine.
  if (w < min_w || h < min_h) return std::fprintf(stderr, "check_png: too small\n"), 1;
  if (colours.size() < 200) return std::fprintf(stderr, "check_png: too few colours: blank?\n"), 1;
  if (sd < 8) return std::fprintf(stderr, "check_png: too little contrast: blank?\n"), 1;
  std::printf("check_png: OK\n");
  return 0;
}
