// The one error type of emergent: a message that names the file and the field at fault.
#pragma once

#include <stdexcept>
#include <string>

namespace emergent {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error("<where>: <what>") when `condition` is false. `where` names the file, tensor or
// field the caller was reading, so that a user can find the bad input.
inline void require(bool condition, const std::string& where, const std::string& what) {
  if (!condition) throw Error(where + ": " + what);
}

}  // namespace emergent
