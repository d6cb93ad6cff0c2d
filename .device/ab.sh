# Same-session A/B on the GPU: the commit in .device/base.tar (git archive of the base) against this tree.
# bash .device/ab.sh "WORKLOAD,WORKLOAD"   (from the repository root on the device; writes $OUT/ab-*.txt)
set -e
ONLY="$1"; ROOT=$(pwd)
rm -rf /tmp/ab && mkdir -p /tmp/ab/base && tar -xf .device/base.tar -C /tmp/ab/base
for round in 1 2; do
  for v in base head; do
    dir=/tmp/ab/$v; [ $v = head ] && dir=$ROOT
    (cd $dir && PYTHONPATH=$dir python -m benchmarks.run --device cuda --only "$ONLY" --skip-compile 2>&1 \
      | grep -E "^\| " > $OUT/ab-$v-$round.txt) || echo "$v failed"
    echo "== $v round $round"; cut -d"|" -f2,6,11 $OUT/ab-$v-$round.txt | tail -n +3
  done
done
