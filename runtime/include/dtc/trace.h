//===- trace.h - Chrome-trace timeline of training steps ------------------===//
#pragma once

namespace dtc::rt {

class Tracer;

// Called by generated code around each op of a traced step (a.trace != null).
void traceBegin(Tracer *t, const char *name);
void traceEnd(Tracer *t);

} // namespace dtc::rt
