# A/B of persistent rows of 4096 on the GPU: the scan change's parent (base), HEAD, and two variants
# of HEAD where rows of 4096 take two per program (8 warps: xb2w8; 4 warps: xb2w4).
# bash .device/rowab.sh WORKLOADS   (run from the repository root on the device; writes $OUT/ab-*.txt)
set -e
ONLY="$1"; ROOT=$(pwd)
rm -rf /tmp/ab && mkdir -p /tmp/ab/base && tar -xf .device/base.tar -C /tmp/ab/base
for v in xb2w8 xb2w4; do
  mkdir -p /tmp/ab/$v && git ls-files | tar -cf - -T - | tar -xf - -C /tmp/ab/$v
done
python - <<'PY'
import re
for v, warps in (("xb2w8", "row_warps(xblock * rblock)"), ("xb2w4", "row_warps(rblock)")):
    p = f"/tmp/ab/{v}/braze/codegen/triton/shapes.py"
    s = open(p).read()
    old = "    xblock = min(next_pow2(xnumel), max(1, device.block_elements // rblock))"
    assert old in s
    s = s.replace(old, "    xblock = min(next_pow2(xnumel), max(2 if rblock == 4096 else 1, device.block_elements // rblock))")
    s = s.replace('    return Shape("row", {"XBLOCK": xblock, "RBLOCK": rblock}, row_warps(xblock * rblock),',
                  f'    return Shape("row", {{"XBLOCK": xblock, "RBLOCK": rblock}}, {warps},')
    open(p, "w").write(s)
PY
for round in 1 2; do
  for v in base head xb2w8 xb2w4; do
    dir=/tmp/ab/$v; [ $v = head ] && dir=$ROOT
    (cd $dir && PYTHONPATH=$dir python -m benchmarks.run --device cuda --only "$ONLY" --skip-compile 2>&1 \
      | grep -E "^\| " > $OUT/ab-$v-$round.txt) || echo "$v failed"
    echo "== $v round $round"; cut -d'|' -f2,6 $OUT/ab-$v-$round.txt | tail -n +3
  done
done
