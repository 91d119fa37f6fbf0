#!/usr/bin/env bash
# slurm_check.sh: the local Slurm round trip of `s2hc grid --slurm --submit`.
# Starts munged, slurmctld and slurmd on localhost in a temporary folder (no system
# config touched), submits a two-point tiny grid as a job array plus its afterok report
# job, waits (bounded) for all of them, checks both runs finished and the report ran,
# then stops every daemon it started (TERM, then KILL). Skipped (0 passed, 0 failed)
# when not root or Slurm is not installed: `scripts/deps.sh --slurm` installs it.
# Also run by `make slurm-check`.
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
skip() {
  echo "slurm_check: skipped: $*" >&2
  echo "slurm_check: 0 passed, 0 failed"
  exit 0
}
[ "$(id -u)" = 0 ] || skip "not root (the daemons need root)"
for c in munged mungekey slurmctld slurmd sbatch squeue scontrol sinfo timeout perl; do
  command -v $c >/dev/null 2>&1 || skip "$c not found (install Slurm with: scripts/deps.sh --slurm)"
done
. tests/cli/lib.sh
[ -x "$S2HC" ] || { fail "no s2hc binary at $S2HC"; finish slurm_check; exit 1; }
T0=$(date +%s)

# ---- the daemons' folder: every parent of the munge socket must be world-executable
SD=$(mktemp -d /tmp/s2hc-slurm.XXXXXX)
chmod 755 "$SD"
mkdir -p "$SD/state" "$SD/spool"
MARK="S2HC_SLURM_CHECK=$SD"   # in the environment of every daemon we start, and their children
PIDS=""
cleanup() {
  # our daemons by PID, then anything they left (slurmstepd) found by the marker
  local extra p
  extra=$(grep -lsz "^$MARK\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3)
  for p in $PIDS $extra; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 1 50); do
    local alive=""
    for p in $PIDS $extra; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  for p in $PIDS $extra; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$SD"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing listens on, below the kernel's range of ephemeral ports: one inside it
# can be an outgoing connection's local port, which no connect() shows but bind() refuses
# (slurmd once failed so, "Address already in use", in a CI run).
EPHEMERAL_LO=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
case "$EPHEMERAL_LO" in '' | *[!0-9]*) EPHEMERAL_LO=32768 ;; esac
if [ "$EPHEMERAL_LO" -gt 11000 ]; then PORT_LO=10000 PORT_N=$((EPHEMERAL_LO - 10000))
else PORT_LO=20000 PORT_N=30000; fi # an unusual range: as before
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((PORT_LO + RANDOM % PORT_N))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo $p; return; }
  done
  echo 6817
}
P1=$(free_port); P2=$(free_port)
while [ "$P2" = "$P1" ]; do P2=$(free_port); done

mungekey -c -k "$SD/munge.key" >/dev/null 2>&1 || mungekey --create --keyfile="$SD/munge.key" >/dev/null 2>&1
chmod 600 "$SD/munge.key"
env "$MARK" munged -F --force --key-file="$SD/munge.key" --socket="$SD/munge.sock" --pid-file="$SD/munged.pid" \
  --seed-file="$SD/munge.seed" --log-file="$SD/munged.log" >"$SD/munged.out" 2>&1 &
PIDS="$PIDS $!"
wait_for 60 test -S "$SD/munge.sock"
[ -S "$SD/munge.sock" ] && ok "munged is up" || { fail "munged did not start: $(tail -n 3 "$SD/munged.log" "$SD/munged.out" 2>/dev/null)"; finish slurm_check; exit 1; }

cat > "$SD/slurm.conf" <<CONF
ClusterName=s2hccheck
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SD/munge.sock
CredType=cred/munge
SlurmctldPort=$P1
SlurmdPort=$P2
StateSaveLocation=$SD/state
SlurmdSpoolDir=$SD/spool
SlurmctldPidFile=$SD/slurmctld.pid
SlurmdPidFile=$SD/slurmd.pid
SlurmctldLogFile=$SD/slurmctld.log
SlurmdLogFile=$SD/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
MpiDefault=none
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$SD/slurm.conf
env "$MARK" slurmctld -D -f "$SLURM_CONF" >"$SD/slurmctld.out" 2>&1 &
PIDS="$PIDS $!"
env "$MARK" slurmd -D -N localhost -f "$SLURM_CONF" >"$SD/slurmd.out" 2>&1 &
PIDS="$PIDS $!"
state=""
for _ in $(seq 1 60); do
  state=$(timeout 5 sinfo -h -N -o %T 2>/dev/null | head -n 1)
  [ "$state" = idle ] && break
  sleep 0.5
done
if [ "$state" = idle ]; then ok "slurmctld and slurmd are up, the node is idle"
else
  fail "the node is not idle ('$state')"; tail -n 5 "$SD/slurmctld.log" "$SD/slurmd.log" >&2
  finish slurm_check; exit 1
fi

# ---- a two-point tiny grid on a synthetic corpus
make_synth_data "$TMP/data" 2>/dev/null
if [ ! -s "$TMP/data/synth/train.bin" ]; then
  perl -e 'local $/; open F, "<", $ARGV[0] or die; $t = <F>; $k = int(length($t) * 0.9);
    for (["train", substr($t, 0, $k)], ["val", substr($t, $k)]) {
      open O, ">", "$ARGV[1]/$_->[0].bin" or die; binmode O;
      print O pack("a8 V V V V Q<", "S2HCTOK", 1, 256, 1, 0, length($_->[1])), $_->[1]; close O }' \
    "$TMP/data/synth/text" "$TMP/data/synth"
fi
cat > "$TMP/two.yaml" <<YAML
base: $REPO/experiments/tiny.yaml
set: {model.n_embd: 32, model.block_size: 32, train.batch: 4, train.steps: 20, train.warmup: 2,
      train.eval_every: 10, train.eval_batches: 2, train.ckpt_every: 10, probe.every: 10,
      probe.final_samples: 4, data.ood: [], data.dir: "$TMP/data", data.train: synth}
sweep:
  residual.method: [identity, s2hc]
name: "{residual.method}-n{residual.n_streams}"
out: $TMP/runs
slurm: {time: "00:05:00", cpus: 1, array_limit: 2}
YAML
expect_status 0 "s2hc grid --slurm --submit" -- "$S2HC" grid "$TMP/two.yaml" --slurm --submit
expect_out "submitted: array job [0-9]+ \(2 tasks\), report job [0-9]+ \(afterok:[0-9]+\)" "both jobs submitted"
A=$(cat "$TMP/runs/slurm/array.jobid" 2>/dev/null); R=$(cat "$TMP/runs/slurm/report.jobid" 2>/dev/null)
[ -n "$A" ] && [ -n "$R" ] && ok "job ids recorded ($A, $R)" || fail "no job ids"

# ---- wait for the array and the report (bounded)
left="?"
for _ in $(seq 1 180); do
  left=$(timeout 5 squeue -h -o %i 2>/dev/null | wc -l)
  [ "$left" = 0 ] && break
  sleep 0.5
done
[ "$left" = 0 ] && ok "every job left the queue" || { fail "jobs still queued: $(timeout 5 squeue 2>&1)"; }
job_state() { timeout 5 scontrol show job "$1" 2>/dev/null | grep -o "JobState=[A-Z_]*" | sort -u | tr '\n' ' '; }
s=$(job_state "$A"); [ "$s" = "JobState=COMPLETED " ] && ok "array tasks completed" || fail "array: $s"
s=$(job_state "$R"); [ "$s" = "JobState=COMPLETED " ] && ok "report job completed" || fail "report: $s"
for n in identity-n4 s2hc-n4; do
  [ -f "$TMP/runs/$n/run.h5" ] && ok "$n: run.h5" || fail "$n: no run.h5"
done
expect_status 0 "--list after Slurm" -- "$S2HC" grid "$TMP/two.yaml" --list
expect_out "2 points: 2 finished" "both runs finished"
ls "$TMP/runs/slurm/${A}_0.out" "$TMP/runs/slurm/${A}_1.out" >/dev/null 2>&1 && ok "one output file per array task" || fail "task outputs: $(ls "$TMP/runs/slurm")"
grep -q "1/1 finished" "$TMP/runs/slurm/${A}_1.out" 2>/dev/null && ok "task 1 ran its point" || fail "task 1 output: $(tail -n 3 "$TMP/runs/slurm/${A}_1.out" 2>/dev/null)"
grep -q "report: 2 points: 2 finished" "$TMP/runs/slurm/report-$R.out" 2>/dev/null && ok "the report job's summary" || fail "report output: $(cat "$TMP/runs/slurm/report-$R.out" 2>/dev/null)"
if "$S2HC" report --help >/dev/null 2>&1; then
  [ -s "$TMP/runs/report/index.html" ] && ok "the report job built the report" || fail "no $TMP/runs/report/index.html"
fi
grep -Eq "s2hc-n4 +finished" "$TMP/runs/slurm/summary.txt" 2>/dev/null && ok "summary.txt lists the points" || fail "summary.txt"
grep -q "^1,s2hc-n4,.*,finished,0," "$TMP/runs/index.csv" 2>/dev/null && ok "index.csv written by the tasks" || fail "index.csv: $(cat "$TMP/runs/index.csv" 2>/dev/null)"
secs=$(( $(date +%s) - T0 ))
[ "$secs" -lt 120 ] && ok "round trip in ${secs}s" || fail "round trip took ${secs}s"
finish slurm_check
