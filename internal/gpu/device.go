package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

// callError is an NVML call that failed with other than NOT_SUPPORTED: a
// failed read, never a missing field.
type callError struct {
	Op     string
	Return nvml.Return
	text   string // taken on the worker
}

func (e *callError) Error() string { return e.Op + ": " + e.text }

func nvmlError(op string, ret nvml.Return) *callError {
	return &callError{Op: op, Return: ret, text: ret.Error()}
}

// driverGone: the driver was unloaded, reloaded or upgraded under us.
func driverGone(err error) bool {
	var e *callError
	if !errors.As(err, &e) {
		return false
	}
	switch e.Return {
	case nvml.ERROR_UNINITIALIZED, nvml.ERROR_DRIVER_NOT_LOADED,
		nvml.ERROR_LIB_RM_VERSION_MISMATCH, nvml.ERROR_LIBRARY_NOT_FOUND:
		return true
	}
	return false
}

// Entry points drivers added late: go-nvml resolves symbols on first call,
// and calling one the library lacks kills the process.
const (
	symTemperatureV  = "nvmlDeviceGetTemperatureV"              // R565; else nvmlDeviceGetTemperature
	symEventReasons  = "nvmlDeviceGetCurrentClocksEventReasons" // R535; else ...ThrottleReasons
	symMemoryInfoV2  = "nvmlDeviceGetMemoryInfo_v2"             // R510; else nvmlDeviceGetMemoryInfo
	symCUDAVersionV2 = "nvmlSystemGetCudaDriverVersion_v2"      // else nvmlSystemGetCudaDriverVersion
	symMarginTemp    = "nvmlDeviceGetMarginTemperature"         // R555; else no margin (NOT_SUPPORTED)
	symFieldValues   = "nvmlDeviceGetFieldValues"               // R410; else no clock event counters
)

var optionalSymbols = []string{symTemperatureV, symEventReasons, symMemoryInfoV2, symCUDAVersionV2, symMarginTemp, symFieldValues}

type device struct {
	index             int
	handle            nvml.Device
	uuid              string
	name              string
	computeCapability string
	err               error // enumeration failed; retried on the next read
}

func describe(lib nvml.Interface, index int) device {
	d := device{index: index}
	var ret nvml.Return
	if d.handle, ret = lib.DeviceGetHandleByIndex(index); ret != nvml.SUCCESS {
		d.err = nvmlError("nvmlDeviceGetHandleByIndex", ret)
		return d
	}
	var errs []error
	check := func(op string, ret nvml.Return) bool {
		if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
			errs = append(errs, nvmlError(op, ret))
		}
		return ret == nvml.SUCCESS
	}
	uuid, ret := d.handle.GetUUID()
	if check("nvmlDeviceGetUUID", ret) {
		d.uuid = validUTF8(uuid)
	}
	name, ret := d.handle.GetName()
	if check("nvmlDeviceGetName", ret) {
		d.name = validUTF8(name)
	}
	major, minor, ret := d.handle.GetCudaComputeCapability()
	if check("nvmlDeviceGetCudaComputeCapability", ret) {
		d.computeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	d.err = errors.Join(errs...)
	return d
}

// cudaVersion: NVML's 13000 is CUDA's 13.0.
func cudaVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// notAvailable is NVML_VALUE_NOT_AVAILABLE: a process whose memory NVML
// does not know (Windows WDDM, some MIG set-ups).
const notAvailable = ^uint64(0)

type deviceReader struct {
	r    readings.Reading
	errs []error
}

func (dr *deviceReader) answered(f readings.Field, op string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		dr.r.Supported[f] = true
		return true
	case nvml.ERROR_NOT_SUPPORTED:
		dr.r.Supported[f] = false
	default:
		dr.errs = append(dr.errs, nvmlError(op, ret))
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// read leaves out a field failing with other than NOT_SUPPORTED, and joins its error.
func read(d *device, has map[string]bool, now time.Time) (readings.Reading, error) {
	dr := &deviceReader{r: readings.Reading{
		Index: d.index, UUID: d.uuid, Name: d.name, ComputeCapability: d.computeCapability,
		Time: now, Supported: map[readings.Field]bool{},
	}}
	r, h := &dr.r, d.handle

	if has[symTemperatureV] {
		t, ret := h.GetTemperatureV().V1() // sensor 0: NVML_TEMPERATURE_GPU
		if dr.answered(readings.FieldTemperature, "nvmlDeviceGetTemperatureV", ret) {
			r.TemperatureCelsius = ptr(float64(t.Temperature))
		}
	} else {
		t, ret := h.GetTemperature(nvml.TEMPERATURE_GPU) // drivers without nvmlDeviceGetTemperatureV
		if dr.answered(readings.FieldTemperature, "nvmlDeviceGetTemperature", ret) {
			r.TemperatureCelsius = ptr(float64(t))
		}
	}

	if mw, ret := h.GetPowerUsage(); dr.answered(readings.FieldPower, "nvmlDeviceGetPowerUsage", ret) {
		r.PowerWatts = ptr(float64(mw) / 1000)
	}
	if mj, ret := h.GetTotalEnergyConsumption(); dr.answered(readings.FieldEnergy, "nvmlDeviceGetTotalEnergyConsumption", ret) {
		r.EnergyJoules = ptr(float64(mj) / 1000)
	}
	if mw, ret := h.GetEnforcedPowerLimit(); dr.answered(readings.FieldPowerLimit, "nvmlDeviceGetEnforcedPowerLimit", ret) {
		r.PowerLimitWatts = ptr(float64(mw) / 1000)
	}

	if mhz, ret := h.GetClockInfo(nvml.CLOCK_SM); dr.answered(readings.FieldSMClock, "nvmlDeviceGetClockInfo", ret) {
		r.SMClockHertz = ptr(float64(mhz) * 1e6)
		switch mhz, ret := h.GetMaxClockInfo(nvml.CLOCK_SM); ret {
		case nvml.SUCCESS:
			r.SMClockMaxHertz = ptr(float64(mhz) * 1e6)
		case nvml.ERROR_NOT_SUPPORTED:
		default:
			dr.errs = append(dr.errs, nvmlError("nvmlDeviceGetMaxClockInfo", ret))
		}
	}

	if u, ret := h.GetUtilizationRates(); dr.answered(readings.FieldUtilization, "nvmlDeviceGetUtilizationRates", ret) {
		r.Utilization = ptr(float64(u.Gpu) / 100)
	}

	var reasons uint64
	var ret nvml.Return
	op := "nvmlDeviceGetCurrentClocksEventReasons"
	if has[symEventReasons] {
		reasons, ret = h.GetCurrentClocksEventReasons()
	} else {
		op = "nvmlDeviceGetCurrentClocksThrottleReasons"
		reasons, ret = h.GetCurrentClocksThrottleReasons() // drivers before R535
	}
	if dr.answered(readings.FieldClocksEventReasons, op, ret) {
		r.ClockEventReasons = ptr(reasons)
	}

	dr.clockEventCounters(h, has[symFieldValues])
	dr.margin(h, has[symMarginTemp])
	if p, ret := h.GetPerformanceState(); dr.answered(readings.FieldPerformanceState, "nvmlDeviceGetPerformanceState", ret) {
		if p >= nvml.PSTATE_0 && p <= nvml.PSTATE_15 { // not NVML_PSTATE_UNKNOWN (32)
			r.PerformanceState = ptr(int(p))
		}
	}

	dr.memory(h, has[symMemoryInfoV2])
	dr.processes(h)
	return dr.r, errors.Join(dr.errs...)
}

// clockEventCounters: a driver older than a field id answers INVALID_ARGUMENT.
func (dr *deviceReader) clockEventCounters(h nvml.Device, has bool) {
	if !has {
		dr.r.Supported[readings.FieldClocksEventCounters] = false
		return
	}
	values := make([]nvml.FieldValue, len(readings.ClockEvents))
	for i, e := range readings.ClockEvents {
		values[i].FieldId = e.FieldID
	}
	if !dr.answered(readings.FieldClocksEventCounters, "nvmlDeviceGetFieldValues", h.GetFieldValues(values)) {
		return
	}
	seconds := map[string]float64{}
	for i, v := range values {
		switch ret := nvml.Return(v.NvmlReturn); ret {
		case nvml.SUCCESS:
			if ns, ok := unsignedValue(v); ok {
				seconds[readings.ClockEvents[i].Name] = float64(ns) / 1e9
			}
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_INVALID_ARGUMENT:
		default:
			dr.errs = append(dr.errs, nvmlError(fmt.Sprintf("nvmlDeviceGetFieldValues(%d)", readings.ClockEvents[i].FieldID), ret))
		}
	}
	if len(seconds) == 0 {
		dr.r.Supported[readings.FieldClocksEventCounters] = false
		return
	}
	dr.r.ClockEventSeconds = seconds
}

// unsignedValue reads the C union in the host's byte order; a type other
// than unsigned is not a duration.
func unsignedValue(v nvml.FieldValue) (uint64, bool) {
	u64 := binary.NativeEndian.Uint64(v.Value[:])
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG:
		return u64, true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.NativeEndian.Uint32(v.Value[:4])), true
	}
	return 0, false
}

func (dr *deviceReader) margin(h nvml.Device, has bool) {
	if !has {
		dr.r.Supported[readings.FieldTemperatureMargin] = false
		return
	}
	m, ret := h.GetMarginTemperature()
	if dr.answered(readings.FieldTemperatureMargin, "nvmlDeviceGetMarginTemperature", ret) {
		dr.r.TemperatureMarginCelsius = ptr(float64(m.MarginTemperature))
	}
}

func (dr *deviceReader) memory(h nvml.Device, v2 bool) {
	var total, used uint64
	var ret nvml.Return
	op := "nvmlDeviceGetMemoryInfo_v2"
	if v2 {
		var m nvml.Memory_v2
		m, ret = h.GetMemoryInfo_v2()
		total, used = m.Total, m.Used
	} else {
		op = "nvmlDeviceGetMemoryInfo"
		var m nvml.Memory
		m, ret = h.GetMemoryInfo()
		total, used = m.Total, m.Used
	}
	if dr.answered(readings.FieldMemoryInfo, op, ret) {
		dr.r.MemoryTotalBytes, dr.r.MemoryUsedBytes = ptr(total), ptr(used)
	}
}

// processes sums a pid NVML lists once per MIG instance, and leaves out one
// whose memory NVML cannot give rather than count it zero.
func (dr *deviceReader) processes(h nvml.Device) {
	infos, ret := h.GetComputeRunningProcesses()
	if !dr.answered(readings.FieldProcesses, "nvmlDeviceGetComputeRunningProcesses", ret) {
		return
	}
	procs := []readings.Process{} // supported and possibly empty: not nil
	at := map[uint32]int{}
	unknown := map[uint32]bool{}
	for _, p := range infos {
		if p.UsedGpuMemory == notAvailable {
			unknown[p.Pid] = true
			continue
		}
		if i, seen := at[p.Pid]; seen {
			procs[i].UsedBytes += p.UsedGpuMemory
			continue
		}
		at[p.Pid] = len(procs)
		procs = append(procs, readings.Process{PID: p.Pid, UsedBytes: p.UsedGpuMemory})
	}
	kept := procs[:0]
	for _, p := range procs {
		if !unknown[p.PID] {
			kept = append(kept, p)
		}
	}
	dr.r.Processes = kept
}

// validUTF8: client_golang panics on an invalid label value.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
