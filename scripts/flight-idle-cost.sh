#!/bin/sh
# The flight recorder's idle CPU against node_exporter scraped at its rhythm:
# an exporter with the recorder, one without (the idle floor), and
# node_exporter (meminfo, vmstat, pressure) scraped every INTERVAL, all
# three on this machine's /proc at once, CPU from every thread's schedstat
# over ROUNDS windows of SECONDS. Nothing scrapes either exporter.
# Usage: scripts/flight-idle-cost.sh [INTERVAL_MS [SECONDS [ROUNDS]]]
set -eu
ms=${1:-200} seconds=${2:-30} rounds=${3:-6}
tmp=$(mktemp -d)
trap 'kill $rec $idle $node 2>/dev/null; rm -rf "$tmp"' EXIT
go build -o "$tmp/spark_exporter" ./cmd/spark_exporter
"$tmp/spark_exporter" --web.listen-address=127.0.0.1:19811 --flight.file="$tmp/flight" \
	--flight.interval="${ms}ms" 2>"$tmp/rec.log" & rec=$!
"$tmp/spark_exporter" --web.listen-address=127.0.0.1:19812 2>"$tmp/idle.log" & idle=$!
/usr/bin/prometheus-node-exporter --web.listen-address=127.0.0.1:19813 --collector.disable-defaults \
	--collector.meminfo --collector.vmstat --collector.pressure 2>"$tmp/node.log" & node=$!
cpu() { cat /proc/"$1"/task/*/schedstat | awk '{ns += $1} END {print ns}'; }
sleep 5
[ -s "$tmp/flight" ] || { echo "no flight ring written" >&2; exit 1; }
wait_s=$(awk "BEGIN {print $ms/1000}")
printf 'round\trecords\tscrapes\trecorder ns/record\tnode_exporter ns/scrape\tratio\n'
for round in $(seq "$rounds"); do
	r0=$(cpu $rec) i0=$(cpu $idle) n0=$(cpu $node)
	start=$(date +%s%N) scrapes=0
	while [ $(( $(date +%s%N) - start )) -lt $((seconds * 1000000000)) ]; do
		curl -s --compressed -o /dev/null http://127.0.0.1:19813/metrics
		scrapes=$((scrapes + 1))
		sleep "$wait_s"
	done
	elapsed=$(( $(date +%s%N) - start ))
	r1=$(cpu $rec) i1=$(cpu $idle) n1=$(cpu $node)
	awk -v round="$round" -v el="$elapsed" -v ms="$ms" -v s="$scrapes" \
		-v r=$((r1 - r0)) -v i=$((i1 - i0)) -v n=$((n1 - n0)) 'BEGIN {
		records = el / (ms * 1e6); per = (r - i) / records; ne = n / s
		printf "%d\t%.0f\t%d\t%.0f\t%.0f\t%.2f\n", round, records, s, per, ne, per / ne }'
done
