#!/usr/bin/env bash
# Undoes what a test kit node (hack/testkit/src/node) changed on the machine, from the state
# file it keeps under /run/ichor-node/: kills its processes (by the PIDs recorded there, every
# process whose command line names the node's directory: containerd's shims, and every process
# in the node's own cgroup root /ichor-node-<pid>), unmounts everything under the node's
# directory (deepest first, lazily when busy), removes that cgroup root from every hierarchy
# (deepest first; no other cgroup is touched: a machine that is itself a Kubernetes node keeps
# its /kubepods), deletes its network namespace, writes back the kernel settings the kubelet
# changed, and removes its own entries in machine directories: the CNI cache entries of its
# network and containers, its links in /var/log/containers, its containerd shims' sockets, the
# kubelet's device-plugin socket when nothing listens on it. A machine directory the node
# created (/var/lib/kubelet, /var/log/containers, /var/lib/cni, /run/containerd) is then removed
# only when empty: what another program put there stays.
# Idempotent; a no-op when there is nothing.
# A node holds /run/ichor-node/lock from before it changes anything until it has put everything
# back, so while the lock is free (or held by the caller) every state file is a leftover;
# nothing is cleaned while another node holds the lock.
# Usage: hack/node/clean.sh          takes the lock (waiting up to $ICHOR_NODE_CLEAN_WAIT
#                                    seconds, default 600, for a running node to stop), then
#                                    cleans every state file (hack/test.sh's exit trap)
#        hack/node/clean.sh --locked every state file; the caller holds the lock (Node::start)
#        hack/node/clean.sh FILE     that state file; the caller holds the lock (Node's drop;
#                                    the node's directory is left to its owner)
set -euo pipefail
state_dir=/run/ichor-node

# start_time PID: field 22 of /proc/PID/stat (the process's start, in clock ticks since boot).
start_time() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# alive PID START: true when PID runs and started at START (not a reused PID).
alive() { [[ -n "$1" && "$(start_time "$1")" == "$2" ]]; }

# cgroup_dirs ROOT: the node's cgroup root (/ichor-node-<pid>) in every hierarchy (v1 and
# hybrid: /sys/fs/cgroup/<hierarchy>; v2 only: /sys/fs/cgroup); nothing for any other name.
cgroup_dirs() {
  [[ "$1" =~ ^/ichor-node-[0-9]+$ ]] || return 0
  local d
  for d in /sys/fs/cgroup"$1" /sys/fs/cgroup/*"$1"; do [[ -d "$d" ]] && printf '%s\n' "$d"; done
  return 0
}

kill_cgroup_tasks() { # ROOT
  local procs pid d
  while read -r d; do
    [[ -n "$d" ]] || continue
    while read -r procs; do
      while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$procs"
    done < <(find "$d" -name cgroup.procs -type f 2>/dev/null)
  done < <(cgroup_dirs "$1")
}

# listening PATH: true when a bound Unix socket at PATH is open (in this network namespace).
listening() { awk -v p="$1" '$NF == p { found = 1 } END { exit !found }' /proc/net/unix; }

clean_one() { # FILE REAP(1: remove the directory too)
  local file=$1 reap=$2 key a b namespace="" dir="" cgroup_root="" keep=0 pids=() sysctls=() created=() containers=()
  while read -r key a b; do
    case "$key" in
      namespace) namespace=$a ;;
      dir) dir=$a ;;
      cgroup_root) cgroup_root=$a ;;
      keep) keep=1 ;;
      pid) pids+=("$a:$b") ;;
      sysctl) sysctls+=("$a=$b") ;;
      created) created+=("$a") ;;
      container) containers+=("$a") ;;
    esac
  done <"$file"
  local entry pid
  for entry in "${pids[@]}"; do
    pid=${entry%%:*}
    alive "$pid" "${entry#*:}" && kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ -n "$dir" && "$dir" == /*/* ]]; then
    local cmdline
    for cmdline in /proc/[0-9]*/cmdline; do
      pid=${cmdline#/proc/}; pid=${pid%/cmdline}
      [[ "$pid" == "$$" ]] && continue
      if tr '\0' ' ' <"$cmdline" 2>/dev/null | grep -qF -- "$dir/"; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  fi
  kill_cgroup_tasks "$cgroup_root"
  sleep 0.2
  kill_cgroup_tasks "$cgroup_root"
  if [[ -n "$dir" && "$dir" == /*/* ]]; then
    local target tries
    for tries in 1 2 3; do
      # Deepest first: the longest paths first.
      local targets
      targets=$(findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d' |
        awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
      [[ -z "$targets" ]] && break
      while read -r target; do
        target=$(printf "%b" "$target")
        umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true
      done <<<"$targets"
    done
  fi
  local cgroup
  while read -r cgroup; do
    [[ -n "$cgroup" ]] || continue
    find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ -d "$cgroup" ]] && echo "hack/node/clean.sh: $cgroup could not be removed (tasks left: $(find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | wc -l))" >&2
  done < <(cgroup_dirs "$cgroup_root")
  if [[ -n "$namespace" ]]; then
    [[ -e "/run/netns/$namespace" ]] && ip netns delete "$namespace" 2>/dev/null || true
    rm -f /var/lib/cni/results/"$namespace"-* 2>/dev/null || true
  fi
  if [[ -n "$dir" && "$dir" == /*/* && -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null || true
  fi
  for entry in "${containers[@]}"; do
    rm -f /var/lib/cni/results/*-"$entry"-* 2>/dev/null || true
  done
  # Its shims' sockets and its containers' CNI cache entries: each task's bundle under the
  # node's directory is named by its container and names its shim's socket.
  local address socket sub id
  if [[ -n "$dir" && "$dir" == /*/* ]]; then
    for address in "$dir"/containerd/state/io.containerd.runtime.v2.task/*/*/address; do
      [[ -f "$address" ]] || continue
      id=${address%/address}; id=${id##*/}
      [[ "$id" =~ ^[0-9a-f]{64}$ ]] && rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null || true
      socket=$(cat "$address" 2>/dev/null) || continue
      socket=${socket#unix://}
      [[ "$socket" =~ ^/run/containerd/s/[0-9a-f]{64}$ && -S "$socket" ]] || continue
      listening "$socket" || rm -f "$socket"
    done
  fi
  for entry in "${created[@]}"; do
    case "$entry" in
      /var/lib/kubelet)
        socket=/var/lib/kubelet/device-plugins/kubelet.sock
        [[ -S "$socket" ]] && ! listening "$socket" && rm -f "$socket"
        sub=device-plugins ;;
      /var/lib/cni) sub=results ;;
      /run/containerd) sub=s ;;
      /var/log/containers) sub="" ;;
      *) continue ;;
    esac
    [[ -n "$sub" && -d "$entry/$sub" ]] && { rmdir "$entry/$sub" 2>/dev/null || true; }
    if [[ -d "$entry" ]] && ! rmdir "$entry" 2>/dev/null; then
      echo "hack/node/clean.sh: left $entry, which the node created: it holds entries that are not the node's ($(ls -A "$entry" | head -5 | tr '\n' ' '))" >&2
    fi
  done
  for entry in "${sysctls[@]}"; do
    key=${entry%%=*}
    printf '%s\n' "${entry#*=}" >"/proc/sys/${key//.//}" ||
      echo "hack/node/clean.sh: could not restore $key=${entry#*=}" >&2
  done
  if [[ $reap -eq 1 && $keep -eq 0 && -n "$dir" && "$dir" == /*/* && -d "$dir" ]]; then
    rm -rf --one-file-system "$dir" 2>/dev/null || echo "hack/node/clean.sh: left $dir (busy)" >&2
  fi
  rm -f "$file"
}

if [[ $# -ge 1 && "$1" != --locked ]]; then
  [[ -f "$1" ]] && clean_one "$1" 0
  exit 0
fi
[[ -d "$state_dir" ]] || exit 0
shopt -s nullglob
leftovers=("$state_dir"/*.state)
((${#leftovers[@]})) || exit 0
if [[ "${1:-}" != --locked ]]; then
  exec 9>>"$state_dir/lock"
  if ! flock -w "${ICHOR_NODE_CLEAN_WAIT:-600}" 9; then
    echo "hack/node/clean.sh: a node still runs (test process $(cat "$state_dir/holder" 2>/dev/null)); left ${leftovers[*]} for the next node's start" >&2
    exit 0
  fi
fi
for file in "$state_dir"/*.state; do
  echo "hack/node/clean.sh: cleaning up after a node whose test did not ($file)" >&2
  clean_one "$file" 1
done
