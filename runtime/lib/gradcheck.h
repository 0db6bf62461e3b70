//===- gradcheck.h - Finite-difference check of the compiled gradients ---===//
#pragma once

#include "session.h"

namespace dtc::rt {

// On the first training batch (file order): compares spec.gradStep's
// gradients with central differences of evalStep's loss on up to 16 elements
// per parameter, prints one "gradcheck PARAM ..." line per parameter and a
// verdict. Parameters are restored bit-exactly. Returns true if all passed.
bool runGradcheck(Session &s);

} // namespace dtc::rt
