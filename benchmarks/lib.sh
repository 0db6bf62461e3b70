# Shared by the benchmark scripts (sourced): the mpirun they launch ranks
# with (oversubscribed, unbound: the machine has few cores), a timestamp and
# the median of a column of numbers on stdin.
mpirun="mpirun --oversubscribe --bind-to none"
[ "$(id -u)" -eq 0 ] && mpirun="$mpirun --allow-run-as-root"
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
