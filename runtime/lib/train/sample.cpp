//===- sample.cpp - train --sample: text from a trained language model ---===//
#include "train/sample.h"

#include "support/error.h"
#include "train/executor.h"
#include "support/rng.h"
#include "train/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>
#include <vector>

namespace dtc::rt {
namespace {

// The ids the tokens are drawn from: bytes the model can read back.
int64_t vocabulary(const ModelSpec &spec) {
  int64_t v = std::min<int64_t>(spec.numClasses, 256);
  if (spec.inputIdLimit > 0)
    v = std::min(v, spec.inputIdLimit);
  return v;
}

} // namespace

void checkSampleModel(const ModelSpec &spec, const std::string &prompt) {
  const int64_t T = spec.inputNumel;
  if (spec.inputType != ElementType::I32 || spec.labelKind != LabelKind::Class ||
      spec.numClasses <= 0 || spec.predictWidth != T * spec.numClasses)
    throw Error(fmt::format("--sample needs a language model: token ids i32[B, T] in and a "
                            "cross_entropy over logits [B, T, V] with next-token labels; "
                            "model '{}' is not one",
                            spec.name));
  const int64_t v = vocabulary(spec);
  for (size_t i = 0; i < prompt.size(); ++i) {
    const auto byte = static_cast<unsigned char>(prompt[i]);
    if (byte >= v)
      throw Error(fmt::format("--prompt: byte {} is {}, outside the {} tokens model '{}' "
                              "reads and predicts [0, {})",
                              i, int(byte), v, spec.name, v));
  }
}

void runSample(Session &s, Executor &exec, const std::function<void(std::string_view)> &write) {
  const ModelSpec &spec = s.spec;
  const Options &o = s.opts;
  checkSampleModel(spec, o.prompt);
  const int64_t T = spec.inputNumel, V = spec.numClasses, vocab = vocabulary(spec);
  // The context: the text's last T tokens at least (memory bounded whatever
  // N is); the text itself goes out as it is made.
  std::string text = o.prompt;
  write(text);

  // One window and its labels (never read but by the loss nobody reports).
  auto window = std::make_shared<std::string>(static_cast<size_t>(T + 1), '\0');
  Dataset ds;
  ds.source = "--prompt";
  ds.size = 1;
  ds.features = T;
  ds.labelKind = LabelKind::Class;
  ds.labelWidth = T;
  ds.text.bytes = window;
  ds.text.files = std::make_shared<const std::vector<TokenText::File>>(
      std::vector<TokenText::File>{{"--prompt", 0}});
  ds.text.begin = 0;
  ds.text.end = T + 1;
  ds.text.window = T;

  std::vector<float> logits(static_cast<size_t>(T * V));
  std::vector<double> p(static_cast<size_t>(vocab));
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  Rng rng(mixSeed(o.seed, 0x5a3b1e5ULL));
  const int64_t zero = 0;
  for (int64_t n = 0; n < o.sampleTokens; ++n) {
    const int64_t L = std::min<int64_t>(T, int64_t(text.size()));
    std::fill(window->begin(), window->end(), '\0');
    std::copy(text.end() - L, text.end(), window->begin());
    const int staged = exec.stage(ds, &zero, 1);
    s.args.predictions = logits.data();
    exec.eval(staged, 0);
    s.args.predictions = nullptr;
    const float *row = logits.data() + (L - 1) * V;
    int64_t best = 0;
    for (int64_t j = 1; j < vocab; ++j)
      if (row[j] > row[best])
        best = j;
    if (!std::isfinite(row[best]))
      throw Error(fmt::format("--sample: the logits of token {} are not finite; the "
                              "parameters of --init diverged",
                              n + 1));
    int64_t next = best;
    if (o.temperature > 0) {
      // The K largest logits (ties: the lower id first), their softmax at
      // temperature T, shifted by the largest.
      std::iota(order.begin(), order.end(), 0);
      int64_t keep = o.topK > 0 ? std::min(o.topK, vocab) : vocab;
      if (keep < vocab)
        std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                          [&](int32_t a, int32_t b) {
                            return row[a] > row[b] || (row[a] == row[b] && a < b);
                          });
      double sum = 0;
      for (int64_t j = 0; j < keep; ++j) {
        const int32_t id = order[size_t(j)];
        sum += p[size_t(j)] = std::exp((double(row[id]) - double(row[best])) / o.temperature);
      }
      double u = rng.uniform() * sum;
      next = order[size_t(keep - 1)];
      for (int64_t j = 0; j < keep; ++j) {
        u -= p[size_t(j)];
        if (u < 0) {
          next = order[size_t(j)];
          break;
        }
      }
    }
    const char token = static_cast<char>(static_cast<unsigned char>(next));
    if (int64_t(text.size()) >= 2 * T)
      text.erase(0, text.size() - size_t(T - 1));
    text += token;
    write(std::string_view(&token, 1));
  }
}

} // namespace dtc::rt
