// An activation arena: one allocation carved into named tensors, sized once per
// (batch, length) as llm.c does. Carving happens in two passes over the same code: a sizing
// pass that only adds up sizes, then a pass that hands out pointers. In debug builds the
// memory is filled with NaN so that a read before a write shows up as NaN in the results.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <emergent/core/layout.hpp>
#include <limits>
#include <memory>
#include <new>

namespace emergent {

template <class Real>
class Arena {
 public:
  Arena() = default;

  // Sizing pass: returns nullptr and records the size. Carving pass: returns the slice.
  Real* take(std::size_t count) {
    const std::size_t offset = used_;
    used_ += align_up(count);
    return data_ ? data_.get() + offset : nullptr;
  }

  // Ends the sizing pass: allocates what the pass asked for (if more than held) and rewinds.
  void allocate_and_rewind() {
    if (used_ > capacity_) {
      data_.reset(static_cast<Real*>(::operator new[](used_ * sizeof(Real), std::align_val_t{64})));
      capacity_ = used_;
#if !defined(NDEBUG) || defined(EMERGENT_NAN_FILL_SCRATCH)
      for (std::size_t i = 0; i < capacity_; ++i) data_[i] = std::numeric_limits<Real>::quiet_NaN();
#endif
    }
    used_ = 0;
  }

  bool allocated() const { return data_ != nullptr; }
  std::size_t capacity() const { return capacity_; }

 private:
  struct AlignedDelete {
    void operator()(Real* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<Real[], AlignedDelete> data_;
  std::size_t used_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace emergent
