/* A scenario: what the GB10 stand-in library reports over time. The text
 * format is described in docs/standin-nvml.md. Parsing and evaluation are
 * pure (no clock, no files) so that Go tests can drive them through cgo. */
#ifndef SPARK_STANDIN_SCENARIO_H
#define SPARK_STANDIN_SCENARIO_H

#include <stddef.h>

#define SC_MAX_DEVICES 8
#define SC_MAX_POINTS 512
#define SC_MAX_PROCS 64
#define SC_PATH_MAX 512
#define SC_TEXT_MAX 96
#define SC_FILE_MAX (1 << 20)
#define SC_NREASONS 9 /* NVML clock event reason bits the scenario names */

/* Fields a scenario can declare unsupported (NVML_ERROR_NOT_SUPPORTED). */
enum sc_field {
	SC_TEMPERATURE,
	SC_POWER,
	SC_ENERGY,
	SC_SM_CLOCK,
	SC_UTILIZATION,
	SC_REASONS,
	SC_PROCESSES,
	SC_COUNTERS,     /* clock event counters (nvmlDeviceGetFieldValues) */
	SC_MARGIN,       /* nvmlDeviceGetMarginTemperature */
	SC_PSTATE,       /* nvmlDeviceGetPerformanceState */
	SC_NFIELDS
};

/* One point of a device's timeline. Numbers are interpolated linearly
 * between points; reasons, their shares and the P-state hold from their
 * point to the next. */
struct sc_point {
	int gpu;                    /* -1: devices without a timeline of their own */
	double t;                   /* scenario seconds */
	double temp;                /* degrees C */
	double power;               /* watts */
	double sm;                  /* SM clock, MHz */
	double util;                /* GPU utilisation, percent */
	unsigned long long reasons; /* reasons the driver holds the clocks down for (NVML bits) */
	double share[SC_NREASONS];  /* per reason bit: share of the time held, 0-1 (its counter's rate) */
	int pstate;                 /* P-state number, 0-15 */
};

/* A process holding GPU memory on one device during [from, to). */
struct sc_proc {
	int gpu;
	unsigned int pid;
	double from, to;
	unsigned long long used; /* bytes */
};

struct scenario {
	char name[SC_TEXT_MAX];
	char driver[SC_TEXT_MAX];
	int cuda;                        /* 13000 = CUDA 13.0, as NVML reports it */
	int cc_major, cc_minor;          /* compute capability */
	int devices;
	unsigned int sm_max;             /* maximum SM clock, MHz */
	unsigned long long memory_total; /* 0: memory info NOT_SUPPORTED (GB10) */
	double power_limit;              /* watts; 0: NOT_SUPPORTED (GB10) */
	double temp_limit;               /* slowdown temperature, C: margin = temp_limit - temp */
	int flags_reported;              /* 0 (GB10): slowdown flags read clear whatever the reasons */
	int unsupported[SC_NFIELDS];

	double speed;  /* scenario seconds per real second */
	int frozen;    /* time stands still at freeze */
	double freeze;

	int init_fail;                   /* nvmlInit always fails */
	char init_fail_file[SC_PATH_MAX];  /* nvmlInit fails while this exists */
	int hang_timed;                  /* device queries block in [hang_after, hang_after+hang_for) */
	double hang_after, hang_for;     /* hang_for < 0: forever */
	char hang_file[SC_PATH_MAX];     /* device queries block while this exists */
	char lost_file[SC_PATH_MAX];     /* device queries answer GPU_IS_LOST while this exists */

	int npoints;
	struct sc_point points[SC_MAX_POINTS];
	int nprocs;
	struct sc_proc procs[SC_MAX_PROCS];
};

/* sc_defaults fills in an idle GB10: one device, no timeline. */
void sc_defaults(struct scenario *sc);

/* sc_parse reads a scenario on top of the defaults. It returns 0, or -1 with
 * a message naming the line in err. text need not be NUL-terminated. */
int sc_parse(const char *text, size_t len, struct scenario *sc, char *err, size_t errlen);

/* sc_state gives device gpu's readings at scenario time t (out->gpu = gpu). */
void sc_state(const struct scenario *sc, int gpu, double t, struct sc_point *out);

/* sc_energy is the energy device gpu used from time 0 to t, in joules. */
double sc_energy(const struct scenario *sc, int gpu, double t);

/* sc_procs copies up to max processes alive on device gpu at time t into
 * out (which may be NULL when max is 0) and returns how many are alive. */
int sc_procs(const struct scenario *sc, int gpu, double t, struct sc_proc *out, int max);

/* sc_flags is the clock event reasons mask NVML reports for a state: on a
 * GB10 (flags_reported 0) the slowdown bits read clear while the driver
 * slows the clocks; only gpu_idle and the clock-setting bits show. */
unsigned long long sc_flags(const struct scenario *sc, const struct sc_point *st);

/* sc_counter_bit is the reason bit of an NVML clock event counter field id
 * (NVML_FI_DEV_CLOCKS_EVENT_REASON_*: 74, 76, 269, 270, 271), or -1. */
int sc_counter_bit(unsigned int field_id);

/* sc_event_seconds is the time device gpu's clocks were held down for
 * reason bit from scenario time 0 to t: its counter, in seconds. */
double sc_event_seconds(const struct scenario *sc, int gpu, int bit, double t);

/* sc_parse_duration reads 90, 90s, 15m, 1h30m or 2.5h as seconds. */
int sc_parse_duration(const char *s, double *seconds);

/* sc_reason_names are the NVML clock event reasons in bit order; NULL
 * entries are bits the exporter's contract does not name. */
extern const char *const sc_reason_names[];
extern const int sc_nreason_names;

#endif
