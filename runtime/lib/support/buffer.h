//===- buffer.h - 64-byte aligned, zero-initialized heap blocks ----------===//
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace dtc::rt {

class AlignedBuffer {
public:
  static constexpr size_t kAlign = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) : size_(bytes) {
    size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded == 0)
      rounded = kAlign;
    void *p = std::aligned_alloc(kAlign, rounded);
    if (!p)
      throw std::bad_alloc();
    std::memset(p, 0, rounded);
    data_.reset(static_cast<char *>(p));
  }

  char *data() const { return data_.get(); }
  template <class T> T *as() const { return reinterpret_cast<T *>(data_.get()); }
  size_t size() const { return size_; }

private:
  struct Free {
    void operator()(char *p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t size_ = 0;
};

} // namespace dtc::rt
