#!/usr/bin/env bash
# A sweep through a real Slurm: starts a one-node cluster on localhost from Debian's
# packages (munge, slurmctld, slurmd, slurm-client; scripts/setup-deps.sh installs them),
# submits a small sweep with `pelab sweep --slurm`, polls squeue until the array is done,
# checks `pelab report` on the results, and stops every daemon it started, by pid.
# Needs root (the daemons run as root: SlurmUser=root); otherwise it reports a skip (77).
set -euo pipefail
source_dir="$1"; work="$2"
if [[ $(id -u) -ne 0 ]]; then echo "skipped: the test cluster needs root"; exit 77; fi
for tool in munged slurmctld slurmd sbatch squeue; do
  if ! command -v "$tool" > /dev/null; then
    # a machine without a package registry (PELAB_SKIP_SETUP: a GPU machine) cannot install it
    if [[ -n "${PELAB_SKIP_SETUP:-}" ]]; then echo "skipped: no $tool and no registry"; exit 77; fi
    echo "missing $tool: run scripts/setup-deps.sh test"; exit 1
  fi
done
rm -rf "$work"; mkdir -p "$work"/{state,spool,munge,munge-run}
work="$(cd "$work" && pwd)"
pids=()
stop_daemons() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null || true; done
}
trap stop_daemons EXIT

# munge: its own key and socket (the socket's directory must be 0755)
chmod 0755 "$work/munge-run"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 0600 "$work/munge/munge.key"
socket="$work/munge-run/munge.socket"
munged --foreground --force --key-file="$work/munge/munge.key" --socket="$socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" --seed-file="$work/munge/seed" \
  > "$work/munge/munged.out" 2>&1 &
pids+=($!)

host=$(hostname -s)
cpus=$(nproc)
memory=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) / 2 ))  # below what the node reports
port=$(( 20000 + RANDOM % 20000 ))
export SLURM_CONF="$work/slurm.conf"
cat > "$SLURM_CONF" <<CONF
ClusterName=pelabtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
# Slurm 23.02 on can run without cgroups, which these plugins do not need: a container's or
# chroot's /sys/fs/cgroup may not be one slurmd accepts (Debian 13's 24.11 refused to start).
# 22.05 (Debian 12) has no such setting and does not ask for cgroups here.
slurm_version=$(slurmd -V | sed 's/^[^0-9]*//')
if (( ${slurm_version%%.*} >= 23 )); then echo "CgroupPlugin=disabled" > "$work/cgroup.conf"; fi
for _ in $(seq 1 50); do [[ -S "$socket" ]] && break; sleep 0.1; done
slurmctld -D -c -f "$SLURM_CONF" > "$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" > "$work/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  state=$(sinfo -h -o %T 2> /dev/null || true)
  [[ "$state" == idle* ]] && break
  sleep 0.2
done
echo "node state: ${state:-none}"
[[ "$state" == idle* ]] || { tail -n 20 "$work"/slurmctld.log "$work"/slurmd.log; exit 1; }

cd "$work"
"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/tiny.yaml" --slurm --partition debug --time 00:05:00 --cpus 1 \
  | tee submit.txt
job=$(sed -n 's/^submitted Slurm job \([0-9]*\).*/\1/p' submit.txt)
test -n "$job"
grep -q "#SBATCH --array=0,1,2,3,4,5,6,7" sweep-out/slurm/sweep.sbatch
for _ in $(seq 1 600); do  # poll squeue (sbatch --wait polls every 32 s)
  [[ -z "$(squeue -h -j "$job" 2> /dev/null)" ]] && break
  sleep 0.5
done
[[ -z "$(squeue -h -j "$job" 2> /dev/null)" ]] || { squeue; tail -n 20 slurmctld.log; exit 1; }
ls sweep-out/slurm/
"$PELAB" report sweep-out | tee report.txt
grep -q "8 of 8 runs complete" report.txt
test "$(ls sweep-out/slurm/"${job}"_*.log | wc -l)" = 8
# a second submission has nothing to do
"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/tiny.yaml" --slurm > again.txt
grep -q "every run is complete" again.txt

echo "== preemption: SIGTERM to the batch shells; the runs checkpoint, the tasks requeue and resume"
"$PELAB" sweep "$source_dir/tests/fixtures/sweeps/slow.yaml" --slurm --partition debug --time 00:05:00 --cpus 1 \
  | tee slow-submit.txt
job=$(sed -n 's/^submitted Slurm job \([0-9]*\).*/\1/p' slow-submit.txt)
grep -q -- "--requeue" slow-out/slurm/sweep.sbatch
for _ in $(seq 1 600); do
  ls slow-out/runs/*/checkpoint.h5 > /dev/null 2>&1 && break
  sleep 0.1
done
ls slow-out/runs/*/checkpoint.h5
# SIGTERM to the batch shells of the tasks running now, as slurmd does for --signal=B:TERM@120
# (scancel --batch --signal=TERM does the same, but retries for a minute on array tasks)
shells=$(pgrep -f "$work/spool/job[0-9]*/slurm_script")
echo "signalling batch shells: $shells"
test -n "$shells"
kill -TERM $shells
# Slurm makes a requeued job wait ~2 minutes before it may start again: release them now
for _ in $(seq 1 100); do
  grep -q "requeueing" slow-out/slurm/*.log 2> /dev/null && break
  sleep 0.1
done
sleep 1
scontrol update JobId="$job" StartTime=now 2> /dev/null || true
for _ in $(seq 1 1200); do
  [[ -z "$(squeue -h -j "$job" 2> /dev/null)" ]] && break
  sleep 0.5
done
[[ -z "$(squeue -h -j "$job" 2> /dev/null)" ]] || { squeue; tail -n 20 slurmctld.log; exit 1; }
grep -h "requeueing" slow-out/slurm/"${job}"_*.log
grep -h "resuming from step" slow-out/runs/*/log.txt
"$PELAB" report slow-out | tee slow-report.txt
grep -q "4 of 4 runs complete" slow-report.txt
echo "slurm_sweep: ok"
