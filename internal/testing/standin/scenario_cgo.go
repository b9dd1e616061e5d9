package standin

// #cgo CFLAGS: -std=gnu11 -Wall
// #cgo LDFLAGS: -lm
// #include <stdlib.h>
// #include "scenario.h"
//
// static struct scenario *sc_new(void) { return calloc(1, sizeof(struct scenario)); }
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// The stand-in's scenario code (scenario.c) is compiled into this package
// too, so that Go tests and fuzzing exercise the very parser and model the
// library runs.

// CheckScenario parses a scenario as the library would and returns its
// error, which names the line.
func CheckScenario(text []byte) error {
	sc, err := parse(text)
	C.free(unsafe.Pointer(sc))
	return err
}

func parse(text []byte) (*C.struct_scenario, error) {
	sc := C.sc_new()
	if sc == nil {
		return nil, errors.New("out of memory")
	}
	C.sc_defaults(sc)
	var buf *C.char
	if len(text) > 0 {
		buf = (*C.char)(C.CBytes(text))
		defer C.free(unsafe.Pointer(buf))
	}
	var msg [300]C.char
	if C.sc_parse(buf, C.size_t(len(text)), sc, &msg[0], C.size_t(len(msg))) != 0 {
		return sc, errors.New(C.GoString(&msg[0]))
	}
	return sc, nil
}

// State is what the scenario makes one device report at one moment.
type State struct {
	Devices      int
	Temperature  float64 // °C, before the library rounds it
	Power        float64 // W
	SMClock      float64 // MHz
	Utilization  float64 // percent
	Reasons      uint64  // NVML clock event reason bits as the library reports them (slowdown bits clear on a GB10)
	Holding      uint64  // the reasons the driver holds the clocks down for, whatever the flags say
	EnergyJoules float64 // since scenario time 0
	// EventSeconds are the clock event counters by NVML field id
	// (74, 76, 269, 270, 271), in seconds since scenario time 0.
	EventSeconds  map[uint32]float64
	MarginCelsius float64 // temperature_limit − temperature, before rounding
	PState        int
	Processes     []Process
}

// Process is a process holding memory on the device.
type Process struct {
	PID  uint32
	Used uint64 // bytes
}

// Evaluate parses a scenario and evaluates device gpu at scenario time t
// (seconds), without loading the library.
func Evaluate(text []byte, gpu int, t float64) (State, error) {
	states, err := Timeline(text, gpu, []float64{t})
	if err != nil {
		return State{}, err
	}
	return states[0], nil
}

// Timeline is Evaluate at each of times, the scenario parsed once.
func Timeline(text []byte, gpu int, times []float64) ([]State, error) {
	sc, err := parse(text)
	defer C.free(unsafe.Pointer(sc))
	if err != nil {
		return nil, err
	}
	if gpu < 0 || gpu >= int(sc.devices) {
		return nil, fmt.Errorf("gpu %d: the scenario has %d devices", gpu, sc.devices)
	}
	states := make([]State, len(times))
	for i, t := range times {
		states[i] = state(sc, gpu, t)
	}
	return states, nil
}

func state(sc *C.struct_scenario, gpu int, t float64) State {
	var pt C.struct_sc_point
	C.sc_state(sc, C.int(gpu), C.double(t), &pt)
	s := State{
		Devices:       int(sc.devices),
		Temperature:   float64(pt.temp),
		Power:         float64(pt.power),
		SMClock:       float64(pt.sm),
		Utilization:   float64(pt.util),
		Reasons:       uint64(C.sc_flags(sc, &pt)),
		Holding:       uint64(pt.reasons),
		EnergyJoules:  float64(C.sc_energy(sc, C.int(gpu), C.double(t))),
		EventSeconds:  map[uint32]float64{},
		MarginCelsius: float64(sc.temp_limit) - float64(pt.temp),
		PState:        int(pt.pstate),
	}
	for _, id := range []uint32{74, 76, 269, 270, 271} {
		s.EventSeconds[id] = float64(C.sc_event_seconds(sc, C.int(gpu), C.sc_counter_bit(C.uint(id)), C.double(t)))
	}
	var procs [C.SC_MAX_PROCS]C.struct_sc_proc
	n := C.sc_procs(sc, C.int(gpu), C.double(t), &procs[0], C.SC_MAX_PROCS)
	for _, p := range procs[:n] {
		s.Processes = append(s.Processes, Process{PID: uint32(p.pid), Used: uint64(p.used)})
	}
	return s
}
