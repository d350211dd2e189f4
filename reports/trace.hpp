#pragma once
// Chrome / Perfetto trace JSON of one trial (chrome://tracing, ui.perfetto.dev): complete events ("ph": "X",
// "ts"/"dur" in microseconds from the trial start).
//
// Thread 1 "trial": native_load, prepare, commit (durations = times_s). Thread 2 "pause": the scheduler pause
// (times_s.pause). Thread 3 "phases": the trial's phases laid out back to back in record order, each inside its
// stage: names starting "prepare." from the prepare start, "commit." from the commit start, the rest from the
// native-load start (a phase repeated per rank was summed by the profiler, so a stage's phases may add up to more
// than the stage). Thread 4 "decode": one event per decode step the probe client saw, ending at the step's time,
// lasting the gap to the previous step capped at the median gap (so a stall shows as empty space).
//
// Start times come from the trial's "timeline" block when the profiler wrote one (offsets in seconds from the
// trial start: native_load / prepare / commit / pause {start_s, end_s}, decode_steps_s); without it the stages are
// laid out back to back from 0 and the pause ends with the commit. Durations always come from times_s when present.
#include <nlohmann/json.hpp>

#include "reports/results.hpp"

namespace wsb {

/// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {"cell", "host", "trial", "status"}}, with
/// process / thread name metadata events ("ph": "M") first.
nlohmann::json trial_trace(const Cell& cell, const Trial& trial);

/// The cell with id `cell_id` and its trial with index `trial_index`. Throws std::runtime_error naming `where`
/// (the file) and the cell ids / trial indices that exist when either is absent.
const Trial& find_trial(const Results& results, const std::string& where, const std::string& cell_id,
                        int64_t trial_index, const Cell** cell_out);

}  // namespace wsb
