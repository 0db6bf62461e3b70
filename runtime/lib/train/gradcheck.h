//===- gradcheck.h - Finite-difference check of the compiled gradients ---===//
#pragma once

#include "train/session.h"

namespace dtc::rt {

class Executor;

// On the first training batch (file order): compares the gradient step's
// gradients with central differences of the eval step's loss on up to 16
// elements per parameter, prints one "gradcheck PARAM ..." line per
// parameter and a verdict. Parameters are restored bit-exactly. Returns true
// if all passed. The steps run on `exec` (the CPU executor without it).
bool runGradcheck(Session &s, Executor &exec);
bool runGradcheck(Session &s);

} // namespace dtc::rt
