package status

import (
	"fmt"
	"strconv"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
)

// fabricOf is nil on a host without RDMA devices.
func fabricOf(in *collected.Fabric) *Fabric {
	s := in.Latest.Snapshot
	if !s.RDMA {
		return nil
	}
	f := &Fabric{}
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			f.Ports++
			// As the metrics: a port is up only when both state files
			// say so, and only an up port's rate was negotiated.
			if p.Known() && p.Up() {
				f.PortsUp++
				f.NegotiatedBitsPerSecond += p.RateBits
			}
		}
		f.PCIe = lowerLink(f.PCIe, d.Current, d.Max)
	}
	if in.Previous != nil {
		f.TrafficBytesPerSecond = traffic(in.Previous, &in.Latest)
	}
	// A port down is no fault by itself: a Spark with one cable has two
	// of its four functions up, a Spark alone none.
	f.State = "up"
	switch {
	case f.PCIe.degraded():
		f.State = "degraded"
	case f.PortsUp == 0:
		f.State = "none_up"
	}
	f.Text = f.text()
	return f
}

func lowerLink(low *PCIe, current, maxLink *fabric.Link) *PCIe {
	if current == nil {
		return low
	}
	var mx fabric.Link
	if maxLink != nil {
		mx = *maxLink
	}
	if low == nil {
		low = &PCIe{}
	}
	if current.Width > 0 && (low.Width == 0 || current.Width < low.Width) {
		low.Width, low.MaxWidth = current.Width, mx.Width
	}
	if current.Transfer > 0 && (low.TransfersPerSecond == 0 || current.Transfer < low.TransfersPerSecond) {
		low.TransfersPerSecond, low.MaxTransfersPerSecond = current.Transfer, mx.Transfer
	}
	if low.Width == 0 && low.TransfersPerSecond == 0 {
		return nil
	}
	return low
}

func (p *PCIe) degraded() bool {
	return p != nil && (p.Width < p.MaxWidth || p.TransfersPerSecond < p.MaxTransfersPerSecond)
}

// traffic is nil when a counter went back (a driver reloaded: no rate can be told).
func traffic(prev, latest *collected.FabricReading) *float64 {
	seconds := latest.At.Sub(prev.At).Seconds()
	if seconds <= 0 {
		return nil
	}
	before := map[string]fabric.Port{}
	for _, d := range prev.Snapshot.Devices {
		for _, p := range d.Ports {
			before[d.Name+"/"+p.Number] = p
		}
	}
	var bytes float64
	measured := false
	for _, d := range latest.Snapshot.Devices {
		for _, p := range d.Ports {
			b, ok := before[d.Name+"/"+p.Number]
			if !ok {
				continue
			}
			for _, pair := range [][2]*float64{{b.ReceiveBytes, p.ReceiveBytes}, {b.TransmitBytes, p.TransmitBytes}} {
				if pair[0] == nil || pair[1] == nil {
					continue
				}
				if *pair[1] < *pair[0] {
					return nil
				}
				bytes += *pair[1] - *pair[0]
				measured = true
			}
		}
	}
	if !measured {
		return nil
	}
	rate := bytes / seconds
	return &rate
}

func (f *Fabric) text() string {
	t := fmt.Sprintf("%d of %d functions up, %s negotiated, ", f.PortsUp, f.Ports, gbitsPerSecond(f.NegotiatedBitsPerSecond))
	if f.TrafficBytesPerSecond != nil {
		t += "carrying " + gbytesPerSecond(*f.TrafficBytesPerSecond)
	} else {
		t += "traffic not yet measured"
	}
	if p := f.PCIe; p != nil {
		t += "; PCIe"
		if p.Width > 0 {
			t += " x" + strconv.FormatFloat(p.Width, 'f', -1, 64)
			if p.Width < p.MaxWidth {
				t += " of x" + strconv.FormatFloat(p.MaxWidth, 'f', -1, 64)
			}
		}
		if p.TransfersPerSecond > 0 {
			t += " at " + strconv.FormatFloat(p.TransfersPerSecond/1e9, 'f', -1, 64)
			if p.TransfersPerSecond < p.MaxTransfersPerSecond {
				t += " of " + strconv.FormatFloat(p.MaxTransfersPerSecond/1e9, 'f', -1, 64)
			}
			t += " GT/s"
		}
	}
	return t
}
