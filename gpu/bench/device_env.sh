# Sourced by the one-device-call scripts (backward.sh, block_sparse.sh, decode.sh, device_check.sh) after
# they set $out and $parts from their arguments: binaries built elsewhere in BIN, their libraries in
# LIB, unbuffered Python, $here (the scripts' folder), OUTDIR made, and `has PART` for the parts asked.
BIN=${BIN:-.carry/bin}
export LD_LIBRARY_PATH=${LIB:-.carry/lib}:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
has() { [[ ",$parts," == *",$1,"* ]]; }
