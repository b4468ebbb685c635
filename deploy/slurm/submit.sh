#!/bin/bash
# Submit the sweep array, then the merge that waits for every task of it to succeed.
# Run from the directory holding sims/ (the jobs start in the submission directory).
set -euo pipefail
here="$(dirname "$0")"
mkdir -p shards "${SHARDS_DIR:-shards}"
array=$(sbatch --parsable "$here/sweep.sbatch")
sbatch --dependency=afterok:"$array" "$here/merge.sbatch"
echo "sweep array $array; merge queued after it"
