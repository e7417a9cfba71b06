// The encoder shapes compiled into `emergent` for the self-pretraining study (encoder.cpp), and
// a run of one of them (train/self_pretraining.hpp). Another shape is one line in encoder.cpp.
#pragma once

#include <emergent/settings/parameters.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace emergent::cli {

// "d_model=64 heads=4 layers=2 d_ff=128 max_len=512, ..." (the ones compiled in).
std::string encoder_shape_names();

// Runs the config (resolve_self_pretraining) on its compiled shape; an Error naming the shape
// fields and the compiled ones when it has none.
nlohmann::json run_self_pretraining(const ParameterValues& config, const std::filesystem::path& out,
                                    bool progress);

}  // namespace emergent::cli
