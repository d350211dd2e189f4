#pragma once
// `wsbench run --shard K/N`: one host's share of a matrix (cells K, K+N, K+2N, ... after --filter), for Slurm job
// arrays and Kubernetes indexed Jobs; `wsbench report merge` joins the hosts' results.
#include <string>
#include <vector>

#include "harness/matrix.hpp"

namespace wsb {

struct Shard {
  int index = 0;  ///< K, 0-based
  int count = 1;  ///< N; 1 = the whole matrix
};

/// Parses "K/N" (decimal, 0 <= K < N, 1 <= N <= 100000). Throws Error(Format) "--shard 'TEXT': ..." saying why.
Shard parse_shard(const std::string& text);

/// The cells at positions K, K+N, K+2N, ... of `cells`, in order.
std::vector<MatrixCell> shard_cells(const std::vector<MatrixCell>& cells, const Shard& shard);

}  // namespace wsb
