#!/usr/bin/env bash
# What tests/cluster/nodes.sh promises: each node its own host name, address,
# /tmp and /dev/shm; the cluster folder shared; a link that goes down and up;
# and `stop` leaving no process, network interface or mount behind, also with
# a process still running on a node (a test that was interrupted).
# Exit 77 (ctest: skipped) where no cluster can run.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
nodes=$repo/tests/cluster/nodes.sh
py=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d /tmp/pf-nodes-XXXXXX)
dir=$work/cluster
trap '"$nodes" stop "$dir" >/dev/null 2>&1 || true; rm -rf --one-file-system "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
links_before=$(ip -o link | awk -F': ' '{print $2}' | sort)
mounts_before=$(awk '{print $5}' /proc/self/mountinfo | sort)
rc=0
"$nodes" start 3 "$dir" 100mbit || rc=$?
[ "$rc" = 0 ] || {
  [ "$rc" = 77 ] && echo "SKIP: no namespaced cluster can run here"
  exit "$rc"
}
on() { "$nodes" exec "$dir" "$@"; }

[ "$(on node2 hostname)" = node2 ] || fail "node2's host name is '$(on node2 hostname)'"
on node2 ip -o -4 addr show eth0 | grep -q "10.77.0.2/24" || fail "node2 has no address 10.77.0.2/24"
[ "$(on node1 getent hosts node3 | awk '{print $1}')" = 10.77.0.3 ] || fail "node1 does not resolve node3"
on node1 sh -c 'echo private >/tmp/node1-only; echo shm >/dev/shm/node1-shm'
on node2 test ! -e /tmp/node1-only || fail "node2 sees node1's /tmp"
test ! -e /tmp/node1-only || fail "this machine sees node1's /tmp"
on node2 test ! -e /dev/shm/node1-shm || fail "node2 sees node1's /dev/shm"
on node1 sh -c "echo shared >$dir/shared/from-node1"
[ "$(on node3 cat "$dir/shared/from-node1")" = shared ] || fail "node3 does not see the shared folder"
echo "host names, addresses, private /tmp and /dev/shm, shared folder: ok"

# A TCP connection from node1 to node2, with node2's link down, then up.
reach() { # NODE ADDRESS: 0 when NODE connects to a listener on ADDRESS within 3 s
  on node2 "$py" -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7777)); s.listen(1); s.settimeout(6)
try:
    s.accept()
except OSError:
    pass' 10.77.0.2 &
  local listener=$!
  sleep 0.5
  local rc=0
  on "$1" "$py" -c '
import socket, sys
socket.create_connection((sys.argv[1], 7777), timeout=3)' "$2" 2>/dev/null || rc=$?
  wait "$listener" || true
  return $rc
}
reach node1 10.77.0.2 || fail "node1 cannot reach node2"
"$nodes" link "$dir" node2 down
! reach node1 10.77.0.2 || fail "node1 reached node2 with node2's link down"
"$nodes" link "$dir" node2 up
reach node1 10.77.0.2 || fail "node1 cannot reach node2 after its link came back"
echo "link down and up: ok"

# An interrupted test: a process left running on a node.
on node3 sleep 1000 &
left=$!
sleep 0.5
"$nodes" stop "$dir" || fail "stop failed"
sleep 0.2
! kill -0 "$left" 2>/dev/null || fail "a process left on node3 survived stop"
[ ! -e "$dir" ] || fail "stop left $dir"
[ "$(ip -o link | awk -F': ' '{print $2}' | sort)" = "$links_before" ] || fail "this machine's network interfaces changed"
[ "$(awk '{print $5}' /proc/self/mountinfo | sort)" = "$mounts_before" ] || fail "this machine's mounts changed"
echo "stop with a process left on a node: no process, interface, mount or folder left"

"$nodes" start 0 "$dir" >/dev/null 2>&1 && fail "start 0 nodes succeeded"
[ ! -e "$dir/run" ] || fail "a refused start left $dir/run"
echo "PASS: nodes.sh"
