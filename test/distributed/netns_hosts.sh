# Three hosts on one machine (sourced by multihost.sh and
# benchmarks/predict_hosts.sh): network namespaces joined by a Linux bridge,
# each with its own address, /tmp and TCP retries, OpenMPI's launch agent
# that starts a host's daemon in its namespace, and hosts_run, which runs an
# MPI job with one rank on each of the first N hosts. Needs $work (an
# absolute directory), fail and skip (the caller's); sets hosts, ips, bridge,
# subnet and job, and traps EXIT to tear everything down; shape_links RATE
# limits every host's link (tc tbf).

# Names unique to this run ($$), so that runs in parallel never share one. The
# addresses live only inside the namespaces (the bridge has none), so runs
# whose $$ % 200 agree do not clash either.
tag=dtcmh$$
hosts=("${tag}a" "${tag}b" "${tag}c") # namespace names; the veth ends outside are named alike
bridge=${tag}br
net=10.213.$(($$ % 200))
subnet=$net.0/24
ips=("$net.1" "$net.2" "$net.3")
job=

# Ends what this test started: the processes in its namespaces (mpirun,
# orted, train), then the namespaces, veths and bridge.
stop_processes() {
  local pids
  [ -n "$job" ] && { kill -9 "$job"; wait "$job"; } 2>/dev/null
  for _ in $(seq 40); do
    pids=$(for h in "${hosts[@]}"; do ip netns pids "$h" 2>/dev/null; done)
    [ -z "$pids" ] && return 0
    kill -9 $pids 2>/dev/null
    sleep 0.25
  done
  echo "warning: processes still running in the test's namespaces: $pids"
}
cleanup() {
  set +e
  stop_processes
  for h in "${hosts[@]}"; do
    ip link del "$h" 2>/dev/null
    ip netns del "$h" 2>/dev/null
  done
  ip link del "$bridge" 2>/dev/null
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted"; exit 130' INT
trap 'echo "FAIL: terminated"; exit 143' TERM
cleanup # names left by an earlier run that had this process id

echo "== hosts ${hosts[*]} on $subnet, bridge $bridge"
err=$(ip netns add "${hosts[0]}" 2>&1) || skip "ip netns add: $err"
err=$(ip link add "$bridge" type bridge 2>&1 && ip link set "$bridge" up 2>&1) ||
  skip "ip link add type bridge: $err"
for i in 0 1 2; do
  h=${hosts[i]}
  { [ $i -eq 0 ] || ip netns add "$h"; } &&
    ip -n "$h" link set lo up &&
    ip link add "$h" type veth peer name "${h}p" netns "$h" &&
    ip -n "$h" link set "${h}p" name eth0 &&
    ip -n "$h" addr add "${ips[i]}/24" dev eth0 &&
    ip -n "$h" link set eth0 up &&
    ip link set "$h" master "$bridge" up &&
    ip netns exec "$h" sh -c 'echo 5 >/proc/sys/net/ipv4/tcp_retries2' &&
    mkdir -p "$work/tmp/$h" || fail "setting up host $h"
done

# OpenMPI's launch agent: "agent.sh HOST COMMAND..." runs COMMAND on HOST, i.e.
# in the namespace that has HOST's address, with that host's own TMPDIR (hosts
# have their own /tmp: the daemons' session directories must not be shared).
cat >"$work/agent.sh" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  ${ips[0]}) ns=${hosts[0]} ;;
  ${ips[1]}) ns=${hosts[1]} ;;
  ${ips[2]}) ns=${hosts[2]} ;;
  *) echo "agent.sh: unknown host \$host" >&2; exit 1 ;;
esac
echo "\$host -> \$ns: \$(ip -n \$ns -o -4 addr show dev eth0)" >>"$work/agent.log"
exec ip netns exec "\$ns" env TMPDIR="$work/tmp/\$ns" sh -c "\$*"
EOF
# Each rank notes where it runs, then becomes the program: "rank.sh LOG PROGRAM ARGS...".
cat >"$work/rank.sh" <<'EOF'
#!/bin/sh
log=$1; shift
echo "rank $OMPI_COMM_WORLD_RANK netns $(ip netns identify $$) addr $(ip -o -4 addr show dev eth0 | awk '{print $4}')" >>"$log"
exec "$@"
EOF
chmod +x "$work/agent.sh" "$work/rank.sh"

# hosts_run N LIMIT ARGS...: mpirun, on host a, with one rank on each of the
# first N hosts, ended by SIGTERM (SIGKILL 5 s later) after LIMIT seconds.
# The hosts share this machine's cores, which real hosts do not: Open MPI,
# seeing one rank a node, would spin in every wait and hold a core the
# others need, so each message round cost a scheduler quantum (a 4 KiB
# all-reduce of 3 ranks on 2 cores took 8 ms, against 0.1 ms with
# mpi_yield_when_idle, which yields the core while waiting).
hosts_run() {
  local n=$1 limit=$2; shift 2
  local list
  list=$(IFS=,; echo "${ips[*]:0:n}")
  timeout -k 5 "$limit" ip netns exec "${hosts[0]}" env TMPDIR="$work/tmp/${hosts[0]}" \
    mpirun --allow-run-as-root --oversubscribe --bind-to none --host "$list" -np "$n" \
    --map-by node --mca plm_rsh_agent "$work/agent.sh" --mca btl tcp,self --mca mpi_yield_when_idle 1 \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" "$@"
}
# shape_links RATE: every host sends at most RATE (tc's units: 1gbit,
# 10gbit) through its link, by a token bucket (tbf; these kernels have no
# netem) holding 1 ms of it; "off" removes the limit. (A link has no burst
# beyond its rate: a bucket of 10 ms, 1.25 MB at 1 Gbit/s, let a whole
# 256 KiB collective through at the veth's speed after any pause, so
# in a step the two links measured the same.)
shape_links() {
  local rate=$1 h bytes
  for h in "${hosts[@]}"; do
    if [ "$rate" = off ]; then
      ip netns exec "$h" tc qdisc del dev eth0 root 2>/dev/null
      continue
    fi
    bytes=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = substr(r, length(n "") + 1);
      m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : 1;
      printf "%d", n * m / 8 / 1000 }')
    ip netns exec "$h" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$bytes" latency 50ms ||
      fail "tc tbf on host $h"
  done
}
