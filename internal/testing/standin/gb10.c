//go:build ignore

/* The GB10 stand-in libnvidia-ml.so.1: the NVML entry points a DGX Spark's
 * GPU answers, driven over time by a scenario (docs/standin-nvml.md).
 *
 * What a GB10 answers (docs/design.md#how-gb10-looks-to-nvml): temperature, power draw, total
 * energy, SM clock and its maximum, utilisation, clock event reasons (their
 * slowdown flags clear, as on real units) and counters, the thermal margin,
 * the P-state and per-process memory. What it does not: memory info (v1 and v2; there is no
 * VRAM, only the unified pool), power limits, BAR1, fans -- those fall to
 * the generated stubs and answer NVML_ERROR_NOT_SUPPORTED, unless the
 * scenario says a patched driver answers memory info.
 *
 * Not compiled by cgo (the build constraint above); internal/testing/standin builds
 * it with gcc together with scenario.c and the generated stubs. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"
#include "scenario.h"

struct nvmlDevice_st {
	int index;
};

static struct nvmlDevice_st devs[SC_MAX_DEVICES] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};

/* mu guards the scenario and the init count. Device queries copy what they
 * need under it and never hold it while hanging. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct scenario sc;
static int inits; /* nvmlInit calls not yet matched by nvmlShutdown */
static int started;
static struct timespec t0; /* scenario time 0: the first successful init */

static double seconds_since(const struct timespec *a)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - a->tv_sec) + (double)(now.tv_nsec - a->tv_nsec) / 1e9;
}

/* scenario_time is the scenario's clock; call with mu held. */
static double scenario_time(void)
{
	if (sc.frozen)
		return sc.freeze;
	return seconds_since(&t0) * sc.speed;
}

static int file_exists(const char *path)
{
	return path[0] != '\0' && access(path, F_OK) == 0;
}

static void complain(const char *msg)
{
	fprintf(stderr, "libnvidia-ml stand-in: %s\n", msg);
}

/* load reads the scenario named by SPARK_NVML_SCENARIO (the built-in idle
 * GB10 without it) and applies SPARK_NVML_SPEED and SPARK_NVML_FREEZE. */
static nvmlReturn_t load(void)
{
	static struct scenario next;
	char err[300];
	const char *path = getenv("SPARK_NVML_SCENARIO");

	sc_defaults(&next);
	if (path && *path) {
		FILE *f = fopen(path, "rb");
		if (!f) {
			snprintf(err, sizeof err, "cannot open the scenario file: %s", strerror(errno));
			complain(err);
			return NVML_ERROR_UNKNOWN;
		}
		char *text = malloc(SC_FILE_MAX + 1);
		size_t n = text ? fread(text, 1, SC_FILE_MAX + 1, f) : 0;
		int bad = !text || ferror(f);
		fclose(f);
		if (bad || sc_parse(text, n, &next, err, sizeof err) < 0) {
			free(text);
			complain(bad ? "cannot read the scenario file" : err);
			return NVML_ERROR_UNKNOWN;
		}
		free(text);
	}
	const char *speed = getenv("SPARK_NVML_SPEED");
	if (speed && *speed) {
		char *end;
		double v = strtod(speed, &end);
		if (*end != '\0' || !(v > 0 && v <= 1e6)) {
			complain("SPARK_NVML_SPEED must be a number in (0, 1e6]");
			return NVML_ERROR_UNKNOWN;
		}
		next.speed = v;
	}
	const char *freeze = getenv("SPARK_NVML_FREEZE");
	if (freeze && *freeze) {
		if (sc_parse_duration(freeze, &next.freeze) < 0) {
			complain("SPARK_NVML_FREEZE must be a time such as 600, 10m or 1h30m");
			return NVML_ERROR_UNKNOWN;
		}
		next.frozen = 1;
	}
	sc = next;
	return NVML_SUCCESS;
}

static nvmlReturn_t init(void)
{
	pthread_mutex_lock(&mu);
	nvmlReturn_t ret = load();
	if (ret == NVML_SUCCESS && (sc.init_fail || file_exists(sc.init_fail_file)))
		ret = NVML_ERROR_DRIVER_NOT_LOADED;
	if (ret == NVML_SUCCESS) {
		inits++;
		if (!started) {
			clock_gettime(CLOCK_MONOTONIC, &t0);
			started = 1;
		}
	}
	pthread_mutex_unlock(&mu);
	return ret;
}

nvmlReturn_t nvmlInit_v2(void) { return init(); }
nvmlReturn_t nvmlInit(void) { return init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return init(); }

nvmlReturn_t nvmlShutdown(void)
{
	pthread_mutex_lock(&mu);
	nvmlReturn_t ret = NVML_ERROR_UNINITIALIZED;
	if (inits > 0) {
		inits--;
		ret = NVML_SUCCESS;
	}
	pthread_mutex_unlock(&mu);
	return ret;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
	switch (result) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case NVML_ERROR_TIMEOUT: return "Timeout";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
	default: return "Unknown Error";
	}
}

/* ---- system queries --------------------------------------------------- */

static nvmlReturn_t copy_text(char *dst, unsigned int length, const char *src)
{
	if (!dst)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(src) + 1 > length)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, src, strlen(src) + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	pthread_mutex_lock(&mu);
	nvmlReturn_t ret = inits ? copy_text(version, length, sc.driver) : NVML_ERROR_UNINITIALIZED;
	pthread_mutex_unlock(&mu);
	return ret;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	char buf[SC_TEXT_MAX + 16];
	pthread_mutex_lock(&mu);
	snprintf(buf, sizeof buf, "%d.%s", sc.cuda / 1000, sc.driver);
	nvmlReturn_t ret = inits ? copy_text(version, length, buf) : NVML_ERROR_UNINITIALIZED;
	pthread_mutex_unlock(&mu);
	return ret;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
	if (!version)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	*version = sc.cuda;
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	nvmlReturn_t ret = NVML_ERROR_UNINITIALIZED;
	if (inits) {
		*count = (unsigned int)sc.devices;
		ret = NVML_SUCCESS;
	}
	pthread_mutex_unlock(&mu);
	return ret;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!device)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	nvmlReturn_t ret = NVML_ERROR_UNINITIALIZED;
	if (inits) {
		ret = NVML_ERROR_INVALID_ARGUMENT;
		if (index < (unsigned int)sc.devices) {
			device->handle = &devs[index];
			ret = NVML_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return ret;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* ---- device queries --------------------------------------------------- */

/* hung says whether device queries block now; call with mu held. */
static int hung(void)
{
	if (file_exists(sc.hang_file))
		return 1;
	if (!sc.hang_timed)
		return 0;
	double t = scenario_time();
	return t >= sc.hang_after && (sc.hang_for < 0 || t < sc.hang_after + sc.hang_for);
}

/* enter starts a device query: it checks the library and the handle, blocks
 * while the scenario says the driver is wedged, and returns with mu held
 * (on success only) and *t set to the scenario time of the answer. */
static nvmlReturn_t enter(nvmlDevice_t device, int *index, double *t)
{
	for (;;) {
		pthread_mutex_lock(&mu);
		if (!inits) {
			pthread_mutex_unlock(&mu);
			return NVML_ERROR_UNINITIALIZED;
		}
		int found = -1;
		for (int i = 0; i < sc.devices; i++)
			if (device.handle == &devs[i])
				found = i;
		if (found < 0) {
			pthread_mutex_unlock(&mu);
			return NVML_ERROR_INVALID_ARGUMENT;
		}
		if (file_exists(sc.lost_file)) {
			/* Fallen off the bus: every query of the device fails. */
			pthread_mutex_unlock(&mu);
			return NVML_ERROR_GPU_IS_LOST;
		}
		if (!hung()) {
			*index = found;
			*t = scenario_time();
			return NVML_SUCCESS;
		}
		pthread_mutex_unlock(&mu);
		/* A wedged driver: the call returns when the hang ends. */
		struct timespec pause = {0, 10 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
}

static nvmlReturn_t leave(nvmlReturn_t ret)
{
	pthread_mutex_unlock(&mu);
	return ret;
}

/* query is the common start of a query for one field: enter, then refuse
 * NULL out-pointers and fields the scenario declares unsupported. */
#define QUERY(device, out, field, idx, t, st)                                   \
	int idx;                                                                \
	double t;                                                               \
	struct sc_point st;                                                     \
	do {                                                                    \
		nvmlReturn_t r_ = enter((device), &idx, &t);                    \
		if (r_ != NVML_SUCCESS)                                         \
			return r_;                                              \
		if (!(out))                                                     \
			return leave(NVML_ERROR_INVALID_ARGUMENT);              \
		if ((field) >= 0 && sc.unsupported[(field)])                    \
			return leave(NVML_ERROR_NOT_SUPPORTED);                 \
		sc_state(&sc, idx, t, &st);                                     \
	} while (0)

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	QUERY(device, index, -1, i, t, st);
	(void)t; (void)st;
	*index = (unsigned int)i;
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	QUERY(device, name, -1, i, t, st);
	(void)i; (void)t; (void)st;
	return leave(copy_text(name, length, sc.name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	char buf[64];
	QUERY(device, uuid, -1, i, t, st);
	(void)t; (void)st;
	snprintf(buf, sizeof buf, "GPU-5b0e7c3a-1f4d-4e2a-9c61-0b10000000%02d", i);
	return leave(copy_text(uuid, length, buf));
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
	QUERY(device, major && minor, -1, i, t, st);
	(void)i; (void)t; (void)st;
	*major = sc.cc_major;
	*minor = sc.cc_minor;
	return leave(NVML_SUCCESS);
}

static unsigned int rounded(double x) { return (unsigned int)lround(x); }

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp)
{
	QUERY(device, temp, SC_TEMPERATURE, i, t, st);
	(void)i; (void)t;
	if (sensor != NVML_TEMPERATURE_GPU)
		return leave(NVML_ERROR_INVALID_ARGUMENT);
	*temp = rounded(st.temp);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temp)
{
	QUERY(device, temp, SC_TEMPERATURE, i, t, st);
	(void)i; (void)t;
	if (temp->version != nvmlTemperature_v1)
		return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	if (temp->sensorType != NVML_TEMPERATURE_GPU)
		return leave(NVML_ERROR_INVALID_ARGUMENT);
	temp->temperature = (int)rounded(st.temp);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *milliwatts)
{
	QUERY(device, milliwatts, SC_POWER, i, t, st);
	(void)i; (void)t;
	*milliwatts = rounded(st.power * 1000);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *millijoules)
{
	QUERY(device, millijoules, SC_ENERGY, i, t, st);
	(void)st;
	*millijoules = (unsigned long long)llround(sc_energy(&sc, i, t) * 1000);
	return leave(NVML_SUCCESS);
}

static nvmlReturn_t power_limit(nvmlDevice_t device, unsigned int *milliwatts)
{
	QUERY(device, milliwatts, -1, i, t, st);
	(void)i; (void)t; (void)st;
	/* GB10: nvidia-smi prints the cap as N/A. */
	if (sc.power_limit <= 0)
		return leave(NVML_ERROR_NOT_SUPPORTED);
	*milliwatts = rounded(sc.power_limit * 1000);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) { return power_limit(device, limit); }
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit) { return power_limit(device, limit); }

static nvmlReturn_t clock_query(nvmlDevice_t device, nvmlClockType_t type, unsigned int *mhz, int max)
{
	QUERY(device, mhz, SC_SM_CLOCK, i, t, st);
	(void)i; (void)t;
	/* GB10 reports one graphics/SM clock; other domains are not modelled. */
	if (type != NVML_CLOCK_SM && type != NVML_CLOCK_GRAPHICS)
		return leave(NVML_ERROR_NOT_SUPPORTED);
	*mhz = max ? sc.sm_max : rounded(st.sm);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock_mhz) { return clock_query(device, type, clock_mhz, 0); }
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock_mhz) { return clock_query(device, type, clock_mhz, 1); }

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	QUERY(device, utilization, SC_UTILIZATION, i, t, st);
	(void)i; (void)t;
	utilization->gpu = rounded(st.util);
	utilization->memory = 0;
	return leave(NVML_SUCCESS);
}

static nvmlReturn_t event_reasons(nvmlDevice_t device, unsigned long long *out, int supported)
{
	QUERY(device, out, SC_REASONS, i, t, st);
	(void)i; (void)t;
	*out = supported ? (1ULL << sc_nreason_names) - 1 : sc_flags(&sc, &st);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *r) { return event_reasons(device, r, 0); }
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) { return event_reasons(device, r, 0); }
nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device, unsigned long long *r) { return event_reasons(device, r, 1); }
nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) { return event_reasons(device, r, 1); }

/* nvmlDeviceGetFieldValues answers the clock event counters (the time the
 * driver held the clocks down per reason, in ns, on the real clock), each
 * value with its own return; every other field id is NOT_SUPPORTED. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
	QUERY(device, values, -1, i, t, st);
	(void)st;
	if (valuesCount <= 0)
		return leave(NVML_ERROR_INVALID_ARGUMENT);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (int k = 0; k < valuesCount; k++) {
		nvmlFieldValue_t *v = &values[k];
		int bit = sc_counter_bit(v->fieldId);
		v->timestamp = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
		v->latencyUsec = 0;
		if (bit < 0 || sc.unsupported[SC_COUNTERS]) {
			v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
			continue;
		}
		v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
		/* Seconds of the library's own clock: a scenario played
		 * faster (speed) holds the clocks for share x real time, so
		 * that rate() over real time still reads the share. */
		v->value.ullVal = (unsigned long long)llround(sc_event_seconds(&sc, i, bit, t) / sc.speed * 1e9);
		v->nvmlReturn = NVML_SUCCESS;
	}
	return leave(NVML_SUCCESS);
}

/* The margin is the scenario's temperature_limit less the temperature, as
 * nvidia-smi's GPU T.Limit Temp (13 C at 81 C on a real unit). */
nvmlReturn_t nvmlDeviceGetMarginTemperature(nvmlDevice_t device, nvmlMarginTemperature_t *margin)
{
	QUERY(device, margin, SC_MARGIN, i, t, st);
	(void)i; (void)t;
	if (margin->version != nvmlMarginTemperature_v1)
		return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	margin->marginTemperature = (int)lround(sc.temp_limit - st.temp);
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pstate)
{
	QUERY(device, pstate, SC_PSTATE, i, t, st);
	(void)i; (void)t;
	*pstate = (nvmlPstates_t)st.pstate;
	return leave(NVML_SUCCESS);
}

/* used_memory is what the scenario's processes on device i hold at t: the
 * CUDA allocator's view that a patched driver's memory info reports. */
static unsigned long long used_memory(int i, double t)
{
	struct sc_proc procs[SC_MAX_PROCS];
	unsigned long long used = 0;
	int n = sc_procs(&sc, i, t, procs, SC_MAX_PROCS);
	for (int k = 0; k < n; k++)
		used += procs[k].used;
	return used < sc.memory_total ? used : sc.memory_total;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	QUERY(device, memory, -1, i, t, st);
	(void)st;
	/* GB10 has no VRAM: nvidia-smi prints memory as Not Supported. */
	if (sc.memory_total == 0)
		return leave(NVML_ERROR_NOT_SUPPORTED);
	memory->total = sc.memory_total;
	memory->used = used_memory(i, t);
	memory->free = memory->total - memory->used;
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	QUERY(device, memory, -1, i, t, st);
	(void)st;
	if (memory->version != nvmlMemory_v2)
		return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	if (sc.memory_total == 0)
		return leave(NVML_ERROR_NOT_SUPPORTED);
	memory->total = sc.memory_total;
	memory->reserved = 0;
	memory->used = used_memory(i, t);
	memory->free = memory->total - memory->used;
	return leave(NVML_SUCCESS);
}

/* processes answers the three versions of GetComputeRunningProcesses with
 * NVML's sizing protocol: too small a buffer gets INSUFFICIENT_SIZE and the
 * count needed. */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *count, void *infos, int version)
{
	struct sc_proc procs[SC_MAX_PROCS];
	QUERY(device, count, SC_PROCESSES, i, t, st);
	(void)st;
	int n = sc_procs(&sc, i, t, procs, SC_MAX_PROCS);
	if (*count < (unsigned int)n || (!infos && n > 0)) {
		*count = (unsigned int)n;
		return leave(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	for (int k = 0; k < n; k++) {
		if (version == 1) {
			nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + k;
			p->pid = procs[k].pid;
			p->usedGpuMemory = procs[k].used;
		} else {
			nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)infos + k;
			p->pid = procs[k].pid;
			p->usedGpuMemory = procs[k].used;
			p->gpuInstanceId = 0xFFFFFFFF; /* no MIG */
			p->computeInstanceId = 0xFFFFFFFF;
		}
	}
	*count = (unsigned int)n;
	return leave(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_v1_t *infos)
{
	return processes(device, count, infos, 1);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_v2_t *infos)
{
	return processes(device, count, infos, 2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_t *infos)
{
	return processes(device, count, infos, 3);
}
