//===- predict.h - train --predict: a trained model on new inputs ---------===//
//
// `train --predict INPUTS --init CKPT --output FILE` runs the evaluation step
// (dropout off) over the inputs in file order and writes one CSV row per
// sample: for a classifier (class labels) the predicted class (the first
// arg-max of the logits) and the softmax probabilities of every class,
// `class,p0,...,p<C-1>`; for a regression model the predictions,
// `y0,...,y<k-1>`. The inputs, inputNumel features per sample:
//   - an IDX images file (gzip or raw; pixels scaled by 1/255, as training
//     reads them);
//   - a NumPy .npy array [N, ...] of float32, float64 or uint8 (uint8
//     scaled by 1/255, as IDX pixels), C order;
//   - CSV: the features only (no label column), an optional header.
// One process: prediction needs no launcher. The output goes through
// AtomicFile (a failure leaves no half-written file).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "data/data.h"

#include <string>

namespace dtc::rt {

struct Session;
class Executor;

// The inputs of --predict as a data set of the model's features and label
// kind, its labels zeros (the evaluation step reads labels; the loss it
// computes is not reported); errors name the file.
Dataset readPredictInputs(const std::string &path, const ModelSpec &spec);

// Runs the prediction over s.data.train (the inputs) with s's parameters
// and writes the CSV to `output`.
void runPredict(Session &s, Executor &exec, const std::string &output);

} // namespace dtc::rt
