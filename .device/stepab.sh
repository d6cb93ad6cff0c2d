# Same-session A/B of braze's statistics kernels and a model's training step: the commit in
# .device/base.tar (git archive of the base), this tree (head), and head whose loops drop
# rmask where chunks lie inside the row (nomask), two rounds each; each generated kernel's
# ms per step in $OUT/kernels-TREE-ROUND.txt.
# bash .device/stepab.sh MODEL ["base head nomask"]   (from the repository root on the device)
set -e
MODEL="$1"; TREES="${2:-base head nomask}"; ROOT=$(pwd)
rm -rf /tmp/ab && mkdir -p /tmp/ab/base /tmp/ab/nomask && tar -xf .device/base.tar -C /tmp/ab/base
case "$TREES" in *nomask*)  # (the code of commit e35bb4a: nomask patches its _even_lanes)
git ls-files | tar -cf - -T - | tar -xf - -C /tmp/ab/nomask
python - <<'PY'
p = "/tmp/ab/nomask/braze/codegen/triton/kernel.py"
s = open(p).read()
old = "        self.even = even_loop(self.shape.name, self.plan.reduce_numel(), self.shape.blocks)\n"
assert old in s
open(p, "w").write(s.replace(old, old + "        if self.even:\n            self.unmasked = {'r'}\n"))
PY
;; esac
for round in 1 2; do
  for v in $TREES; do
    dir=/tmp/ab/$v; [ $v = head ] && dir=$ROOT
    echo "== $v round $round"
    (cd $dir && PYTHONPATH=$dir:$ROOT/.device python $ROOT/.device/statvariants.py bn 2>&1 | grep -v Warn) || echo "$v failed"
    (cd $dir && PYTHONPATH=$dir python $ROOT/.device/stepab.py $MODEL $OUT/kernels-$v-$round.txt 2>&1 | grep -E "^==|^   ") || echo "$v failed"
  done
done
