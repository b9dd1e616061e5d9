#!/usr/bin/env bash
# Writes the fixture /sys trees of the fabric collector,
# testdata/sys/spark-fabric (a healthy Spark, one QSFP cable in the first
# port) and testdata/sys/spark-fabric-degraded (a function down, another
# trained at PCIe x2), laid out as the mlx5 driver lays them out: each
# class/ entry a symbolic link into devices/. testdata/sys/README.md gives
# the public source of each detail. Run from the repository root.
set -euo pipefail

# device domain bus.function netdev up width rcv_words xmit_words link_downed out_of_sequence
spark() {
  local root=$1; shift
  rm -rf "$root"
  mkdir -p "$root/class/infiniband" "$root/class/net"
  while read -r dev dom fn netdev state width rcv xmit downed oos; do
    [ -n "$dev" ] || continue
    # The kernel names PCI directories 0000:01:00.0; a Go module's zip
    # refuses ':' in a file name (golang.org/x/mod/module.CheckFilePath),
    # so the fixtures write '_' for it. Nothing reads these names: the
    # collector follows the class/ links.
    local rootport="pci${dom}_00/${dom}_00_00.0"
    local pci="devices/$rootport/${dom}_01_00.$fn"
    local ib="$pci/infiniband/$dev"
    mkdir -p "$root/$ib/ports/1/counters" "$root/$ib/ports/1/hw_counters" "$root/$ib/ports/1/gid_attrs/ndevs" "$root/$pci/net/$netdev"
    ln -sfn "../../$ib" "$root/class/infiniband/$dev"
    ln -sfn "../../../${dom}_01_00.$fn" "$root/$ib/device"
    ln -sfn "../../$pci/net/$netdev" "$root/class/net/$netdev"
    echo "$width" >"$root/$pci/current_link_width"
    echo 4 >"$root/$pci/max_link_width"
    echo "32.0 GT/s PCIe" >"$root/$pci/current_link_speed"
    echo "32.0 GT/s PCIe" >"$root/$pci/max_link_speed"
    echo "$netdev" >"$root/$pci/net/$netdev/ifname"
    echo 28.39.1002 >"$root/$ib/fw_ver"
    echo "1: CA" >"$root/$ib/node_type"
    local p="$root/$ib/ports/1"
    echo Ethernet >"$p/link_layer"
    echo "$netdev" >"$p/gid_attrs/ndevs/0"
    case $state in
      up) echo "4: ACTIVE" >"$p/state"; echo "5: LinkUp" >"$p/phys_state"; echo "200 Gb/sec (4X HDR)" >"$p/rate"; up=1 ;;
      nocable) echo "1: DOWN" >"$p/state"; echo "3: Disabled" >"$p/phys_state"; echo "40 Gb/sec (4X QDR)" >"$p/rate"; up=0 ;;
      lost) echo "1: DOWN" >"$p/state"; echo "2: Polling" >"$p/phys_state"; echo "40 Gb/sec (4X QDR)" >"$p/rate"; up=0 ;;
    esac
    echo "$rcv" >"$p/counters/port_rcv_data"
    echo "$xmit" >"$p/counters/port_xmit_data"
    echo $((rcv / 1024)) >"$p/counters/port_rcv_packets"
    echo $((xmit / 1024)) >"$p/counters/port_xmit_packets"
    echo $((rcv / 1024)) >"$p/counters/unicast_rcv_packets"
    echo $((xmit / 1024)) >"$p/counters/unicast_xmit_packets"
    echo 0 >"$p/counters/multicast_rcv_packets"
    echo 0 >"$p/counters/multicast_xmit_packets"
    for c in excessive_buffer_overrun_errors link_error_recovery local_link_integrity_errors \
      port_rcv_constraint_errors port_rcv_errors port_rcv_remote_physical_errors port_rcv_switch_relay_errors \
      port_xmit_constraint_errors port_xmit_discards symbol_error VL15_dropped port_xmit_wait; do
      echo 0 >"$p/counters/$c"
    done
    echo "$downed" >"$p/counters/link_downed"
    for c in duplicate_request implied_nak_seq_err lifespan local_ack_timeout_err np_ecn_marked_roce_packets \
      out_of_buffer packet_seq_err req_cqe_error req_cqe_flush_error req_remote_access_errors \
      req_remote_invalid_request resp_cqe_error resp_cqe_flush_error resp_local_length_error \
      resp_remote_access_errors rnr_nak_retry_err roce_adp_retrans roce_adp_retrans_to roce_slow_restart \
      roce_slow_restart_cnps roce_slow_restart_trans rp_cnp_ignored rx_atomic_requests rx_dct_connect \
      rx_icrc_encapsulated rx_read_requests rx_write_requests; do
      echo 0 >"$p/hw_counters/$c"
    done
    echo 10 >"$p/hw_counters/lifespan"
    echo "$oos" >"$p/hw_counters/out_of_sequence"
    echo $((up * 1842)) >"$p/hw_counters/np_cnp_sent"
    echo $((up * 1790)) >"$p/hw_counters/rp_cnp_handled"
  done
}

# Healthy: the first port (f0) cabled to the other Spark, both of its
# functions up and carrying about the same; the second port (f1) without a
# cable, never up.
spark testdata/sys/spark-fabric <<'T'
rocep1s0f0   0000 0 enp1s0f0np0   up      4 2864127401 2911530112 0 0
roceP2p1s0f0 0002 0 enP2p1s0f0np0 up      4 2790443017 2853312550 0 0
rocep1s0f1   0000 1 enp1s0f1np1   nocable 4 0 0 0 0
roceP2p1s0f1 0002 1 enP2p1s0f1np1 nocable 4 0 0 0 0
T

# Degraded: roceP2p1s0f0 lost its link (polling for the peer, link_downed
# 1), rocep1s0f0 trained at PCIe x2 and sees packets out of sequence.
spark testdata/sys/spark-fabric-degraded <<'T'
rocep1s0f0   0000 0 enp1s0f0np0   up      2 1433211090 1391100457 0 17
roceP2p1s0f0 0002 0 enP2p1s0f0np0 lost    4 811234567 790102300 1 0
rocep1s0f1   0000 1 enp1s0f1np1   nocable 4 0 0 0 0
roceP2p1s0f1 0002 1 enP2p1s0f1np1 nocable 4 0 0 0 0
T
