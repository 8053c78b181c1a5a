#!/usr/bin/env bash
# Checks the per-ISA copies of the fast CPU kernels (kernels/cpu/simd/isa.h) for AVX instructions
# outside their own namespace. A function of the AVX-512 copy that is not in
# tandem::kernels::cpu::avx512 (an out-of-line standard-library template, an inline helper of a
# shared header) is a COMDAT the linker may pick for the whole program, which would then execute
# AVX-512 on a CPU without it. Meaningful only when the rest of the build targets baseline x86-64
# (TANDEM_NATIVE=OFF): then no function outside the AVX copies' namespaces may use VEX or EVEX
# encoded instructions (mnemonics v*, ymm/zmm/mask registers), and the generic copy none at all.
#
# Usage: isa_leak_check.sh OBJECT_LIST_FILE   (one object path per line; the copy is named by the
# object's CMake target directory, tandem_kernels_cpu_<isa>.dir)
set -euo pipefail
list=${1:?usage: isa_leak_check.sh OBJECT_LIST_FILE}
objdump=${OBJDUMP:-objdump}
leaks=0
checked=0
while IFS= read -r obj; do
  [[ -n "$obj" ]] || continue
  case "$obj" in
    *tandem_kernels_cpu_avx512.dir*) prefix='6avx512' ;;
    *tandem_kernels_cpu_avx2.dir*) prefix='4avx2' ;;
    *tandem_kernels_cpu_generic.dir*) prefix='' ;;
    *) echo "isa_leak_check: cannot tell the ISA copy of $obj" >&2; exit 2 ;;
  esac
  [[ -f "$obj" ]] || { echo "isa_leak_check: missing object $obj" >&2; exit 2; }
  checked=$((checked + 1))
  # Mangled names: a function (or a lambda, or a local entity) of the copy's namespace starts with
  # _ZN[K...]6tandem7kernels3cpu6avx512 or _ZZN...; anything else must be baseline code.
  out=$("$objdump" -d --no-show-raw-insn "$obj" | awk -v prefix="$prefix" -v obj="$obj" '
    /^[0-9a-f]+ <.*>:$/ {
      fn = substr($2, 2, length($2) - 3)
      own = prefix != "" && fn ~ ("^_ZZ?N[KVRO]*6tandem7kernels3cpu" prefix)
      next
    }
    /^ +[0-9a-f]+:\t/ {
      if (own) next
      insn = $0; sub(/^ +[0-9a-f]+:\t/, "", insn)
      if (insn ~ /^v[a-z0-9]+/ || insn ~ /%[yz]mm[0-9]|%k[0-7]/) {
        if (!(fn in seen)) { seen[fn] = 1; printf "%s: %s: %s\n", obj, fn, insn }
      }
    }')
  if [[ -n "$out" ]]; then
    echo "$out" | sed -n '1,20p'
    leaks=$((leaks + $(echo "$out" | wc -l)))
  fi
done < "$list"
if ((checked == 0)); then
  echo "isa_leak_check: no objects listed in $list" >&2
  exit 2
fi
if ((leaks > 0)); then
  echo "isa_leak_check: $leaks function(s) outside an ISA copy's namespace use AVX instructions" >&2
  exit 1
fi
echo "isa_leak_check: $checked objects, no AVX code outside the ISA copies' namespaces"
