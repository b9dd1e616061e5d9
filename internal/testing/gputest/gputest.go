// Package gputest holds go-nvml mocks shaped like a GB10, for the tests of
// the NVML client and of the collectors built on it.
package gputest

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// GiB is 2^30 bytes.
const GiB = 1 << 30

// GB10 is a mock device answering as a GB10 does mid-run: temperature 87 °C,
// 100.25 W, 123456.789 J, SM clock 1980 of 3003 MHz, 98% busy, SW power cap
// and SW thermal slowdown active, processes 4101 (41 GiB) and 4102
// (30 GiB). Memory info and the power limit answer NOT_SUPPORTED. Its
// clock event counters are ClockEventNanoseconds (the figures of a real
// unit's nvidia-smi -q), its thermal margin 13 °C, its P-state P0.
func GB10(index int) *mock.Device {
	d := gb10(index)
	d.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
		for i := range values {
			ns, ok := ClockEventNanoseconds[values[i].FieldId]
			if !ok {
				values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			values[i].NvmlReturn = uint32(nvml.SUCCESS)
			values[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			binary.NativeEndian.PutUint64(values[i].Value[:], ns)
		}
		return nvml.SUCCESS
	}
	d.GetMarginTemperatureFunc = func() (nvml.MarginTemperature, nvml.Return) {
		return nvml.MarginTemperature{MarginTemperature: 13}, nvml.SUCCESS
	}
	d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return nvml.PSTATE_0, nvml.SUCCESS }
	return d
}

// ClockEventNanoseconds are GB10's clock event counters by NVML field id:
// SW power capping 10,800,240,649 µs and HW thermal slowdown 1,195,386 µs
// (a unit on driver 580.173.02), SW thermal slowdown 903,158 µs
// (ollama/ollama#13552), the others 0.
var ClockEventNanoseconds = map[uint32]uint64{
	74:  10_800_240_649_000,
	76:  0,
	269: 903_158_000,
	270: 1_195_386_000,
	271: 0,
}

func gb10(index int) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:                  func() (string, nvml.Return) { return fmt.Sprintf("GPU-test-%d", index), nvml.SUCCESS },
		GetNameFunc:                  func() (string, nvml.Return) { return "NVIDIA GB10", nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) { return 12, 1, nvml.SUCCESS },
		GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
			if s != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return 87, nvml.SUCCESS
		},
		GetPowerUsageFunc:             func() (uint32, nvml.Return) { return 100250, nvml.SUCCESS },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) { return 123456789, nvml.SUCCESS },
		GetEnforcedPowerLimitFunc:     func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			if c != nvml.CLOCK_SM {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return 1980, nvml.SUCCESS
		},
		GetMaxClockInfoFunc: func(nvml.ClockType) (uint32, nvml.Return) { return 3003, nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 98}, nvml.SUCCESS
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) {
			return nvml.ClocksEventReasonSwPowerCap | nvml.ClocksEventReasonSwThermalSlowdown, nvml.SUCCESS
		},
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 4101, UsedGpuMemory: 41 * GiB}, {Pid: 4102, UsedGpuMemory: 30 * GiB}}, nvml.SUCCESS
		},
	}
}

// Library is a mock NVML holding devs, driver 580.95.05 and CUDA 13.0. Its
// driver lacks nvmlDeviceGetTemperatureV, whose answer go-nvml gives no way
// to mock, so clients fall back to nvmlDeviceGetTemperature.
func Library(devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
				if s == "nvmlDeviceGetTemperatureV" {
					return errors.New("undefined symbol")
				}
				return nil
			}}
		},
		SystemGetDriverVersionFunc:        func() (string, nvml.Return) { return "580.95.05", nvml.SUCCESS },
		SystemGetCudaDriverVersion_v2Func: func() (int, nvml.Return) { return 13000, nvml.SUCCESS },
		DeviceGetCountFunc:                func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}
